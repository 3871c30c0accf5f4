//! The vault's tests: the same behaviour in every backend (real SQLite files in a temporary
//! folder, a `redis-server` of their own), sealing, rotation, and what the file reveals.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

const SHORT: Duration = Duration::from_millis(300);

fn ring(keys: &[u8]) -> Keyring {
    Keyring::new(keys.iter().map(|n| [*n; 32]).collect()).unwrap()
}

/// A fresh folder, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        TempDir(
            std::env::temp_dir().join(format!("sluice-vault-{}-{nanos}-{n}", std::process::id())),
        )
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Our own `redis-server` on a free loopback port, killed at the end.
struct RedisServer(std::process::Child, u16);

impl RedisServer {
    fn start() -> RedisServer {
        let bin = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
            .map(|d| d.join("redis-server"))
            .find(|p| p.is_file())
            .expect("redis-server is not installed: the vault's Redis tests need it. Install Debian's package (`apt-get install redis-server`)");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = RedisServer(
            std::process::Command::new(bin)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
            port,
        );
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                server.0.try_wait().unwrap().is_none(),
                "redis-server exited"
            );
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "redis-server did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    async fn vault(&self) -> Vault {
        let url = format!("redis://127.0.0.1:{}/0", self.1);
        Vault::open_redis(&url, ring(&[1])).await.unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn round_trip(v: &Vault, _: &Vault) {
    assert_eq!(v.get("grants", "a").await.unwrap(), None);
    v.put("grants", "b", b"one").await.unwrap();
    v.put("grants", "a:1", b"").await.unwrap();
    v.put("grants", "b", b"two").await.unwrap();
    v.put("clients", "c", b"three").await.unwrap();
    assert_eq!(v.get("grants", "b").await.unwrap().unwrap(), b"two");
    assert_eq!(v.get("grants", "a:1").await.unwrap().unwrap(), b"");
    assert_eq!(v.keys("grants").await.unwrap(), ["a:1", "b"]);
    assert_eq!(v.keys("clients").await.unwrap(), ["c"]);
    assert_eq!(v.keys("nothing").await.unwrap(), Vec::<String>::new());
    assert!(v.delete("grants", "a:1").await.unwrap());
    assert!(!v.delete("grants", "a:1").await.unwrap());
    assert_eq!(v.take("grants", "b").await.unwrap().unwrap(), b"two");
    assert_eq!(v.take("grants", "b").await.unwrap(), None);
    assert_eq!(v.keys("grants").await.unwrap(), Vec::<String>::new());
}

async fn expiry(_: &Vault, v: &Vault) {
    v.put_expiring("pending", "s1", b"flow", SHORT)
        .await
        .unwrap();
    v.put_expiring("pending", "s2", b"flow", SHORT)
        .await
        .unwrap();
    v.put_expiring("pending", "kept", b"flow", SHORT)
        .await
        .unwrap();
    v.put("pending", "kept", b"grant").await.unwrap(); // a put makes it permanent
    assert_eq!(v.get("pending", "s1").await.unwrap().unwrap(), b"flow");
    assert_eq!(v.keys("pending").await.unwrap(), ["kept", "s1", "s2"]);
    tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
    assert_eq!(v.get("pending", "s1").await.unwrap(), None);
    assert_eq!(v.take("pending", "s2").await.unwrap(), None);
    assert_eq!(v.keys("pending").await.unwrap(), ["kept"]);
    assert!(!v.delete("pending", "s1").await.unwrap());
}

/// Two handles, as two processes (or replicas) would have.
async fn single_use(a: &Vault, b: &Vault) {
    a.put("pending", "state", b"verifier").await.unwrap();
    let takes = (0..20).map(|n| {
        let v = if n % 2 == 0 { a.clone() } else { b.clone() };
        tokio::spawn(async move { v.take("pending", "state").await.unwrap() })
    });
    let mut got = Vec::new();
    for t in takes.collect::<Vec<_>>() {
        got.extend(t.await.unwrap());
    }
    assert_eq!(got, [b"verifier".to_vec()]);
}

async fn locks(a: &Vault, b: &Vault) {
    let long = Duration::from_secs(30);
    let held = a.try_lock("refresh:x", long).await.unwrap().unwrap();
    assert!(b.try_lock("refresh:x", long).await.unwrap().is_none());
    assert!(a.try_lock("refresh:x", long).await.unwrap().is_none());
    assert!(b.try_lock("refresh:y", long).await.unwrap().is_some());
    let busy = b.lock("refresh:x", long, Duration::from_millis(200)).await;
    assert!(matches!(busy, Err(VaultError::Busy { .. })), "{busy:?}");
    held.release().await;
    // Expiry: a holder that never releases loses the lock after its time to live...
    let stale = b.try_lock("refresh:x", SHORT).await.unwrap().unwrap();
    assert!(a.try_lock("refresh:x", long).await.unwrap().is_none());
    tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
    let fresh = a.try_lock("refresh:x", long).await.unwrap().unwrap();
    // ...and its late release does not free the new holder's lock.
    stale.release().await;
    assert!(b.try_lock("refresh:x", long).await.unwrap().is_none());
    // Dropping releases; lock() waits for it.
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.lock("refresh:x", long, Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(120)).await;
    drop(fresh);
    assert_eq!(waiter.await.unwrap().unwrap().name(), "refresh:x");
}

/// Each behaviour in each backend, given two handles on one store (as two processes or
/// replicas would have).
macro_rules! in_every_backend {
    ($($behaviour:ident),*) => {
        mod memory {
            $(#[tokio::test]
            async fn $behaviour() {
                let v = super::Vault::memory(super::ring(&[1]));
                assert_eq!(v.describe(), "memory");
                super::$behaviour(&v, &v.clone()).await;
            })*
        }
        mod file {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $behaviour() {
                let dir = super::TempDir::new();
                let path = dir.0.join("nested/vault.db");
                let a = super::Vault::open_file(&path, super::ring(&[1])).unwrap();
                let b = super::Vault::open_file(&path, super::ring(&[1])).unwrap();
                assert_eq!(a.describe(), format!("file {}", path.display()));
                super::$behaviour(&a, &b).await;
            })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $behaviour() {
                let server = super::RedisServer::start();
                let (a, b) = (server.vault().await, server.vault().await);
                assert_eq!(a.describe(), format!("redis 127.0.0.1:{}/0", server.1));
                super::$behaviour(&a, &b).await;
            })*
        }
    };
}

in_every_backend!(round_trip, expiry, single_use, locks);

#[test]
fn a_file_lock_dropped_outside_a_runtime_is_released_at_once() {
    let dir = TempDir::new();
    let v = Vault::open_file(&dir.0.join("vault.db"), ring(&[1])).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let long = Duration::from_secs(30);
    let held = rt.block_on(v.try_lock("x", long)).unwrap().unwrap();
    assert!(rt.block_on(v.try_lock("x", long)).unwrap().is_none());
    drop(held);
    assert!(rt.block_on(v.try_lock("x", long)).unwrap().is_some());
}

#[test]
fn redis_is_described_without_its_password() {
    let client = ::redis::Client::open("redis://user:hunter2@cache.internal:6380/3").unwrap();
    assert_eq!(
        crate::redis::shown(client.get_connection_info()),
        "redis cache.internal:6380/3"
    );
}

#[tokio::test]
async fn keys_rotate_the_first_seals_every_one_opens() {
    let dir = TempDir::new();
    let path = dir.0.join("vault.db");
    let a = Vault::open_file(&path, ring(&[0xA])).unwrap();
    a.put("grants", "up", b"grant").await.unwrap();
    let b_only = Vault::open_file(&path, ring(&[0xB])).unwrap();
    let e = b_only.get("grants", "up").await.unwrap_err();
    assert!(matches!(&e, VaultError::Sealed { table, key } if table == "grants" && key == "up"));
    assert!(e.to_string().contains("vault key does not match"), "{e}");
    let rotated = Vault::open_file(&path, ring(&[0xB, 0xA])).unwrap();
    assert_eq!(
        rotated.get("grants", "up").await.unwrap().unwrap(),
        b"grant"
    );
    rotated.put("grants", "up", b"grant").await.unwrap(); // re-sealed with B
    assert_eq!(b_only.get("grants", "up").await.unwrap().unwrap(), b"grant");
    assert!(matches!(
        a.get("grants", "up").await,
        Err(VaultError::Sealed { .. })
    ));
}

#[tokio::test]
async fn reseal_moves_every_row_to_the_first_key() {
    let dir = TempDir::new();
    let path = dir.0.join("vault.db");
    let a = Vault::open_file(&path, ring(&[0xA])).unwrap();
    a.put("grants", "one", b"g1").await.unwrap();
    a.put("grants", "two", b"g2").await.unwrap();
    let rotated = Vault::open_file(&path, ring(&[0xB, 0xA])).unwrap();
    rotated.put("grants", "three", b"g3").await.unwrap(); // sealed with B already
    assert_eq!(rotated.reseal("grants").await.unwrap(), 2);
    assert_eq!(
        rotated.reseal("grants").await.unwrap(),
        0,
        "nothing left to move"
    );
    let b_only = Vault::open_file(&path, ring(&[0xB])).unwrap();
    for (k, v) in [("one", b"g1"), ("two", b"g2"), ("three", b"g3")] {
        assert_eq!(b_only.get("grants", k).await.unwrap().unwrap(), v);
    }
    let c_only = Vault::open_file(&path, ring(&[0xC])).unwrap();
    assert!(matches!(
        c_only.reseal("grants").await,
        Err(VaultError::Sealed { .. })
    ));
}

#[tokio::test]
async fn a_blob_moved_to_another_row_does_not_open() {
    let v = Vault::memory(ring(&[1]));
    v.put("grants", "a", b"grant").await.unwrap();
    let Store::Memory(m) = &v.inner.store else {
        unreachable!()
    };
    let blob = m.get("grants", "a").await.unwrap().unwrap();
    for (table, key) in [
        ("grants", "b"),
        ("clients", "a"),
        ("grantsa", ""),
        ("grant", "sa"),
    ] {
        m.put(table, key, blob.clone(), None).await.unwrap();
        assert!(
            matches!(v.get(table, key).await, Err(VaultError::Sealed { .. })),
            "{table}/{key}"
        );
    }
    let mut tampered = blob.clone();
    *tampered.last_mut().unwrap() ^= 1;
    for bad in [tampered, blob[..20].to_vec(), Vec::new()] {
        m.put("grants", "a", bad, None).await.unwrap();
        assert!(matches!(
            v.get("grants", "a").await,
            Err(VaultError::Sealed { .. })
        ));
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The raw bytes of the file and its -wal and -shm companions.
fn raw_files(path: &Path) -> Vec<u8> {
    ["", "-wal", "-shm"]
        .iter()
        .flat_map(|ext| std::fs::read(format!("{}{ext}", path.display())).unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn the_file_reveals_nothing_and_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    const TOKEN: &[u8] = b"tok-SECRET-1234567890";
    const REFRESH: &[u8] = b"ref-SECRET-0987654321";
    let dir = TempDir::new();
    let path = dir.0.join("vault.db");
    let v = Vault::open_file(&path, ring(&[1])).unwrap();
    v.put("grants", "upstream-1", TOKEN).await.unwrap();
    v.put("refresh", "upstream-1", REFRESH).await.unwrap();
    for ext in ["", "-wal", "-shm"] {
        let file = format!("{}{ext}", path.display());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    let open = raw_files(&path);
    drop(v);
    for raw in [open, raw_files(&path)] {
        assert!(contains(&raw, b"upstream-1"), "the rows are there");
        assert!(!contains(&raw, TOKEN) && !contains(&raw, REFRESH));
    }
    let other = Vault::open_file(&path, ring(&[2])).unwrap();
    for table in ["grants", "refresh"] {
        let e = other.get(table, "upstream-1").await.unwrap_err();
        assert!(matches!(e, VaultError::Sealed { .. }));
        assert!(!contains(format!("{e} {e:?}").as_bytes(), b"SECRET"), "{e}");
    }
}

#[test]
fn keys_from_base64_and_keyring_debug() {
    let key = key_from_base64(&keygen()).unwrap();
    let std = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";
    for text in [
        std,
        &std[..43],
        " q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA\n",
    ] {
        assert_eq!(key_from_base64(text).unwrap()[..2], [0xab, 0xcd]);
    }
    let url = "_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-8=";
    assert_eq!(key_from_base64(url).unwrap()[0], 0xff);
    assert_eq!(
        key_from_base64("c2VjcmV0").unwrap_err(),
        KeyError::Length(6)
    );
    let e = key_from_base64("not a key: hunter2!").unwrap_err();
    assert!(
        e == KeyError::NotBase64 && !e.to_string().contains("hunter2"),
        "{e}"
    );
    assert_eq!(Keyring::new(Vec::new()).unwrap_err(), KeyError::NoKeys);
    let debug = format!("{:?}", Keyring::new(vec![key, [7; 32]]).unwrap());
    assert_eq!(debug, "Keyring { keys: 2 }");
}
