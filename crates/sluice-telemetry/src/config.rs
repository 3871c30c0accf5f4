//! Where traces go: `sluice.json`'s `telemetry` section, else the `OTEL_*` environment.

use percent_encoding::percent_decode_str;
use sluice_config::TelemetrySettings;

/// Where traces go, resolved from `sluice.json` and the `OTEL_*` environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportConfig {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub url: String,
    /// `service.name`.
    pub service_name: String,
    /// Headers on every export request.
    pub headers: Vec<(String, String)>,
}

impl ExportConfig {
    /// `telemetry.otlp_endpoint` (plus `/v1/traces`), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// (as is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces`); None: tracing is off
    /// (also with `OTEL_SDK_DISABLED=true`). The service name: `telemetry.service_name`, else
    /// `OTEL_SERVICE_NAME`, else `sluice`. Headers: `telemetry.headers`, else
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`).
    pub fn resolve(
        settings: &TelemetrySettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<ExportConfig> {
        let var = |n: &str| {
            env(n)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        let with_path = |base: &str| {
            let base = base.trim_end_matches('/');
            if base.ends_with("/v1/traces") {
                base.to_string()
            } else {
                format!("{base}/v1/traces")
            }
        };
        let (url, from_env) = match &settings.otlp_endpoint {
            Some(e) => (with_path(e), false),
            None => match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(u) => (u, true),
                None => (with_path(&var("OTEL_EXPORTER_OTLP_ENDPOINT")?), true),
            },
        };
        if from_env && !(url.starts_with("http://") || url.starts_with("https://")) {
            tracing::warn!(
                "the OTLP endpoint {url:?} from the environment is not an http(s) URL; traces are off"
            );
            return None;
        }
        if from_env
            && var("OTEL_EXPORTER_OTLP_PROTOCOL").is_some_and(|p| p.eq_ignore_ascii_case("grpc"))
        {
            tracing::warn!("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: Sluice exports OTLP over HTTP (JSON) only, to {url}");
        }
        let service_name = settings
            .service_name
            .clone()
            .or_else(|| var("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "sluice".into());
        let headers = if settings.headers.is_empty() {
            var("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                .or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"))
                .map(|h| parse_env_headers(&h))
                .unwrap_or_default()
        } else {
            settings
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        Some(ExportConfig {
            url,
            service_name,
            headers,
        })
    }
}

/// `k=v,k2=v2` with percent-encoded values (the OTel environment format).
fn parse_env_headers(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| {
                let v = percent_decode_str(v.trim()).decode_utf8_lossy();
                (k.to_string(), v.into_owned())
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_config_prefers_the_file_then_the_environment() {
        let none = |_: &str| None;
        assert_eq!(
            ExportConfig::resolve(&TelemetrySettings::default(), &none),
            None
        );
        let file = TelemetrySettings {
            otlp_endpoint: Some("http://127.0.0.1:4318/".into()),
            service_name: None,
            headers: [("x-api-key".to_string(), "k".to_string())].into(),
        };
        let env = |n: &str| match n {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("https://collector:4318".to_string()),
            "OTEL_SERVICE_NAME" => Some("edge".to_string()),
            "OTEL_EXPORTER_OTLP_HEADERS" => Some("a=1, b=x%20y".to_string()),
            _ => None,
        };
        assert_eq!(
            ExportConfig::resolve(&file, &env),
            Some(ExportConfig {
                url: "http://127.0.0.1:4318/v1/traces".into(),
                service_name: "edge".into(),
                headers: vec![("x-api-key".into(), "k".into())],
            })
        );
        assert_eq!(
            ExportConfig::resolve(&TelemetrySettings::default(), &env),
            Some(ExportConfig {
                url: "https://collector:4318/v1/traces".into(),
                service_name: "edge".into(),
                headers: vec![("a".into(), "1".into()), ("b".into(), "x y".into())],
            })
        );
        let traces = |n: &str| match n {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://c:9/custom".to_string()),
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://ignored:1".to_string()),
            _ => None,
        };
        let c = ExportConfig::resolve(&TelemetrySettings::default(), &traces).unwrap();
        assert_eq!(
            (c.url.as_str(), c.service_name.as_str()),
            ("http://c:9/custom", "sluice")
        );
        let off = |n: &str| match n {
            "OTEL_SDK_DISABLED" => Some("true".to_string()),
            _ => None,
        };
        assert_eq!(ExportConfig::resolve(&file, &off), None);
    }

    #[test]
    fn env_headers_are_percent_decoded() {
        assert_eq!(
            parse_env_headers("k=a%2Cb%3d, =x,bad,z=%zz%4"),
            vec![("k".into(), "a,b=".into()), ("z".into(), "%zz%4".into())]
        );
    }
}
