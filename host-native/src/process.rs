//! Process lease owners: an owner id that names this process (boot, pid,
//! start time) and a liveness check through `/proc`, so that a lease whose
//! owner process has died can be taken over at once instead of waiting out
//! its time-to-live.
//!
//! Owner ids have the form `proc:<boot>:<pid>:<start>:<nonce>`: `boot` is the
//! first eight hex digits of the kernel's boot id, `start` the process start
//! time in clock ticks since boot (so that a recycled pid is not mistaken for
//! the owner), `nonce` tells apart two owners inside one process (two
//! simulated tabs). Only owners of this machine's current boot can be judged;
//! anything else is [`Liveness::Unknown`] and waits for the lease to expire.

use std::fs;

use agent_kernel::OwnerId;
use agent_kernel::host::{Entropy, random_id};

/// What this process knows about a lease owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A process of this boot that still runs (or an owner inside this process).
    Alive,
    /// A process of this boot that no longer runs: its lease can be taken now.
    Dead,
    /// Not a process owner, another boot or machine, or `/proc` is missing.
    Unknown,
}

/// This process as seen through `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub boot: String,
    pub pid: u32,
    pub start: u64,
}

impl ProcessIdentity {
    /// The current process, or `None` where `/proc` is not available.
    pub fn current() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            boot: boot_id()?,
            pid,
            start: start_time(pid)?.0,
        })
    }
}

/// The first eight hex digits of the kernel's boot id.
fn boot_id() -> Option<String> {
    let raw = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: String = raw
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    (hex.len() == 8).then_some(hex)
}

/// A process's start time (clock ticks since boot) and whether it is a zombie.
fn start_time(pid: u32) -> Option<(u64, bool)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ...`: comm may hold spaces and parentheses, so split
    // after the last `)`. Field 3 (state) is index 0 there, field 22
    // (starttime) index 19.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = *fields.first()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, matches!(state, "Z" | "X" | "x")))
}

/// A fresh owner id for this process; a plain random id when `/proc` is missing.
pub fn process_owner(entropy: &dyn Entropy) -> Result<OwnerId, agent_kernel::IdError> {
    let nonce = random_id(entropy, "");
    let text = match ProcessIdentity::current() {
        Some(me) => format!("proc:{}:{}:{}:{}", me.boot, me.pid, me.start, &nonce[..12]),
        None => format!("owner-{nonce}"),
    };
    OwnerId::new(text)
}

/// Parse a process owner id into (boot, pid, start).
fn parse(owner: &OwnerId) -> Option<(&str, u32, u64)> {
    let mut parts = owner.as_str().split(':');
    if parts.next()? != "proc" {
        return None;
    }
    let boot = parts.next()?;
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    parts.next()?;
    parts.next().is_none().then_some((boot, pid, start))
}

/// Whether `owner` (a process owner id) still runs on this machine.
pub fn owner_liveness(owner: &OwnerId) -> Liveness {
    let Some((boot, pid, start)) = parse(owner) else {
        return Liveness::Unknown;
    };
    match boot_id() {
        Some(current) if current == boot => {}
        _ => return Liveness::Unknown,
    }
    if pid == std::process::id() {
        return Liveness::Alive;
    }
    match start_time(pid) {
        Some((s, zombie)) if s == start && !zombie => Liveness::Alive,
        // Gone, a zombie, or the pid now belongs to another process.
        _ if std::path::Path::new("/proc/self").exists() => Liveness::Dead,
        _ => Liveness::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_kernel::host::SeededEntropy;

    #[test]
    fn own_owner_is_alive_and_parses() {
        let owner = process_owner(&SeededEntropy::new(1)).expect("owner id");
        assert!(owner.as_str().starts_with("proc:"), "{owner}");
        let (_, pid, _) = parse(&owner).expect("parses");
        assert_eq!(pid, std::process::id());
        assert_eq!(owner_liveness(&owner), Liveness::Alive);
    }

    #[test]
    fn exited_child_is_dead() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        let (start, _) = start_time(pid).expect("child visible in /proc");
        child.wait().expect("wait");
        let me = ProcessIdentity::current().expect("proc");
        let owner = OwnerId::new(format!("proc:{}:{pid}:{start}:abc", me.boot)).expect("id");
        assert_eq!(owner_liveness(&owner), Liveness::Dead);
    }

    #[test]
    fn recycled_pid_with_other_start_time_is_dead() {
        let me = ProcessIdentity::current().expect("proc");
        // pid 1 exists, but not with this start time.
        let owner = OwnerId::new(format!("proc:{}:1:999999999999:abc", me.boot)).expect("id");
        assert_eq!(owner_liveness(&owner), Liveness::Dead);
    }

    #[test]
    fn foreign_or_malformed_owners_are_unknown() {
        for text in [
            "tab-a",
            "proc:00000000:1:1:x",
            "proc:zz:1:1:x",
            "proc:abc",
            "proc:a:b:c:d",
            "proc:a:1:1:x:extra",
        ] {
            let owner = OwnerId::new(text).expect("id");
            assert_eq!(owner_liveness(&owner), Liveness::Unknown, "{text}");
        }
    }
}
