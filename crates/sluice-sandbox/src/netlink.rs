//! Bringing the loopback interface of a new network namespace up: one `RTM_NEWLINK` request
//! over a netlink socket, written by hand (32 bytes) rather than through a netlink crate.

use nix::sys::socket::{
    recv, sendto, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};
use std::os::fd::AsRawFd;

/// `RTM_NEWLINK` (linux/rtnetlink.h).
const RTM_NEWLINK: u16 = 16;
/// `NLMSG_ERROR`: the kernel's answer, an error code of 0 being the acknowledgement.
const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST | NLM_F_ACK`.
const FLAGS: u16 = 0x1 | 0x4;
/// `IFF_UP`.
const IFF_UP: u32 = 0x1;
/// The loopback interface's index in every network namespace.
const LOOPBACK_INDEX: i32 = 1;

/// Set `lo` up in this process's network namespace (needs `CAP_NET_ADMIN` there: the creator
/// of the namespace has it until it executes another program).
pub(crate) fn loopback_up() -> Result<(), String> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| format!("netlink socket: {e}"))?;
    // struct nlmsghdr (16 bytes) + struct ifinfomsg (16 bytes), native byte order.
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes()); // nlmsg_type
    msg.extend_from_slice(&FLAGS.to_ne_bytes()); // nlmsg_flags
    msg.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: the kernel assigns it
    msg.push(0); // ifi_family: AF_UNSPEC
    msg.push(0); // padding
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes()); // ifi_index
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    sendto(
        fd.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| format!("netlink send: {e}"))?;
    let mut buf = [0u8; 1024];
    let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())
        .map_err(|e| format!("netlink receive: {e}"))?;
    if n < 20 {
        return Err(format!("netlink: a short answer ({n} bytes)"));
    }
    let kind = u16::from_ne_bytes([buf[4], buf[5]]);
    let code = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
    match (kind, code) {
        (NLMSG_ERROR, 0) => Ok(()),
        (NLMSG_ERROR, c) => Err(format!(
            "the kernel refused: {}",
            nix::errno::Errno::from_raw(-c)
        )),
        (k, _) => Err(format!("netlink: unexpected answer type {k}")),
    }
}
