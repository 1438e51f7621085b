//! Process lease owners: an owner id that names this process (boot, PID
//! namespace, pid, start time) and a liveness check through `/proc`, so that
//! a lease whose owner process has died can be taken over at once instead of
//! waiting out its time-to-live. The liveness rule ([`judge`]) lives here and
//! only here.
//!
//! Owner ids have the form `proc:<boot>:pidns-<ns>:<pid>:<start>:<nonce>`:
//! `boot` is the first eight hex digits of the kernel's boot id, `ns` the
//! inode of this process's PID namespace (`readlink /proc/self/ns/pid` gives
//! `pid:[4026531836]`; `pidns-unknown` when it cannot be read), `start` the
//! process start time in clock ticks since boot (so that a recycled pid is not
//! mistaken for the owner), `nonce` tells apart two owners inside one process
//! (two simulated tabs).
//!
//! A pid only means something inside its PID namespace: containers that share
//! a data directory share the boot id but not their pids. So an owner is
//! judged `Dead` only when it names this boot *and* this PID namespace and
//! `/proc` shows its process gone. Another boot, another or an unknown
//! namespace, or no `/proc` is [`Liveness::Unknown`]: the lease waits out its
//! time-to-live. Owner ids of the older form `proc:<boot>:<pid>:<start>:<nonce>`
//! (written before the namespace was recorded) still decode, with an unknown
//! namespace, so they too wait out their time-to-live: the writer may have
//! been in another container, and waiting one TTL once after an upgrade
//! is the safe price. (Older binaries read the new six-part form as
//! malformed, hence `Unknown`: also safe in a mixed-version fleet.)

use std::fs;

use agent_kernel::OwnerId;
use agent_kernel::host::{Entropy, random_id};

/// What this process knows about a lease owner: `Alive` (a process of this
/// boot and PID namespace that still runs, or an owner inside this process),
/// `Dead` (one that no longer runs: its lease can be taken now), `Unknown`
/// (not a process owner, another boot, machine or PID namespace, or `/proc`
/// is missing: wait for the TTL). The SQLite store's type, which it asks.
pub use agent_store_sqlite::Liveness;

/// This process as seen through `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub boot: String,
    /// The PID namespace's inode, `None` when `/proc/self/ns/pid` is unreadable.
    pub pid_ns: Option<u64>,
    pub pid: u32,
    pub start: u64,
}

impl ProcessIdentity {
    /// The current process, or `None` where `/proc` is not available.
    pub fn current() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            boot: boot_id()?,
            pid_ns: pid_namespace(),
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

/// This process's PID namespace inode, from the `pid:[4026531836]` link.
fn pid_namespace() -> Option<u64> {
    let link = fs::read_link("/proc/self/ns/pid").ok()?;
    parse_namespace_link(link.to_str()?)
}

/// `pid:[4026531836]` → 4026531836; anything else → `None`.
fn parse_namespace_link(link: &str) -> Option<u64> {
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
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

/// The namespace field of an owner id.
fn namespace_field(ns: Option<u64>) -> String {
    match ns {
        Some(ns) => format!("pidns-{ns}"),
        None => "pidns-unknown".to_owned(),
    }
}

/// A fresh owner id for this process; a plain random id when `/proc` is missing.
pub fn process_owner(entropy: &dyn Entropy) -> Result<OwnerId, agent_kernel::IdError> {
    let nonce = random_id(entropy, "");
    let text = match ProcessIdentity::current() {
        Some(me) => format!(
            "proc:{}:{}:{}:{}:{}",
            me.boot,
            namespace_field(me.pid_ns),
            me.pid,
            me.start,
            &nonce[..12]
        ),
        None => format!("owner-{nonce}"),
    };
    OwnerId::new(text)
}

/// A decoded process owner id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOwner {
    pub boot: String,
    /// `None`: an unknown namespace (unreadable when written, or the older
    /// five-part form that did not record it).
    pub pid_ns: Option<u64>,
    pub pid: u32,
    pub start: u64,
}

/// Decode a process owner id (either form); `None` for anything else.
pub fn parse_owner(owner: &OwnerId) -> Option<ProcessOwner> {
    let parts: Vec<&str> = owner.as_str().split(':').collect();
    let (boot, pid_ns, rest) = match parts.as_slice() {
        ["proc", boot, ns, rest @ ..] if rest.len() == 3 => {
            let ns = match ns.strip_prefix("pidns-")? {
                "unknown" => None,
                n => Some(n.parse().ok()?),
            };
            (*boot, ns, rest)
        }
        // The older form, without the namespace.
        ["proc", boot, rest @ ..] if rest.len() == 3 => (*boot, None, rest),
        _ => return None,
    };
    let [pid, start, _nonce] = rest else {
        return None;
    };
    Some(ProcessOwner {
        boot: boot.to_string(),
        pid_ns,
        pid: pid.parse().ok()?,
        start: start.parse().ok()?,
    })
}

/// What the judging process knows about itself and its `/proc`.
pub struct Observer<'a> {
    /// This boot, `None` when unknown.
    pub boot: Option<&'a str>,
    /// This PID namespace, `None` when unknown.
    pub pid_ns: Option<u64>,
    /// This process's pid.
    pub pid: u32,
    /// Whether `/proc` shows processes here at all.
    pub proc_visible: bool,
    /// `/proc/<pid>/stat` of a pid in this namespace: start time and zombie flag.
    pub probe: &'a dyn Fn(u32) -> Option<(u64, bool)>,
}

/// The liveness rule, the one place it is decided: only an owner of this
/// boot *and* this known PID namespace can be `Dead`; see the module docs.
pub fn judge(owner: &ProcessOwner, here: &Observer<'_>) -> Liveness {
    if here.boot != Some(owner.boot.as_str()) {
        return Liveness::Unknown;
    }
    match (owner.pid_ns, here.pid_ns) {
        (Some(theirs), Some(ours)) if theirs == ours => {}
        // Another namespace, or one that cannot be compared: its pid means
        // nothing here.
        _ => return Liveness::Unknown,
    }
    if owner.pid == here.pid {
        return Liveness::Alive;
    }
    match (here.probe)(owner.pid) {
        Some((s, zombie)) if s == owner.start && !zombie => Liveness::Alive,
        // Gone, a zombie, or the pid now belongs to another process.
        _ if here.proc_visible => Liveness::Dead,
        _ => Liveness::Unknown,
    }
}

/// Whether `owner` (a process owner id) still runs on this machine.
pub fn owner_liveness(owner: &OwnerId) -> Liveness {
    let Some(parsed) = parse_owner(owner) else {
        return Liveness::Unknown;
    };
    let boot = boot_id();
    let here = Observer {
        boot: boot.as_deref(),
        pid_ns: pid_namespace(),
        pid: std::process::id(),
        proc_visible: std::path::Path::new("/proc/self").exists(),
        probe: &start_time,
    };
    judge(&parsed, &here)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_kernel::host::SeededEntropy;

    fn me() -> ProcessIdentity {
        ProcessIdentity::current().expect("proc")
    }

    fn ns_field() -> String {
        namespace_field(me().pid_ns)
    }

    #[test]
    fn own_owner_is_alive_and_parses() {
        let owner = process_owner(&SeededEntropy::new(1)).expect("owner id");
        assert!(owner.as_str().starts_with("proc:"), "{owner}");
        let parsed = parse_owner(&owner).expect("parses");
        assert_eq!(parsed.pid, std::process::id());
        assert_eq!(parsed.pid_ns, pid_namespace());
        assert!(
            parsed.pid_ns.is_some(),
            "this test host has /proc/self/ns/pid"
        );
        assert_eq!(owner_liveness(&owner), Liveness::Alive);
    }

    #[test]
    fn namespace_links_parse() {
        assert_eq!(parse_namespace_link("pid:[4026531836]"), Some(4026531836));
        for bad in [
            "",
            "pid:[]",
            "net:[4026531836]",
            "pid:[x]",
            "pid:4026531836",
        ] {
            assert_eq!(parse_namespace_link(bad), None, "{bad}");
        }
    }

    #[test]
    fn exited_child_is_dead() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        let (start, _) = start_time(pid).expect("child visible in /proc");
        child.wait().expect("wait");
        let owner = OwnerId::new(format!(
            "proc:{}:{}:{pid}:{start}:abc",
            me().boot,
            ns_field()
        ))
        .expect("id");
        assert_eq!(owner_liveness(&owner), Liveness::Dead);
    }

    #[test]
    fn recycled_pid_with_other_start_time_is_dead() {
        // pid 1 exists, but not with this start time.
        let owner = OwnerId::new(format!(
            "proc:{}:{}:1:999999999999:abc",
            me().boot,
            ns_field()
        ))
        .expect("id");
        assert_eq!(owner_liveness(&owner), Liveness::Dead);
    }

    /// Issue 12 item 5: a dead-looking pid of another PID namespace, of an
    /// unknown one, or of the older form without a namespace is `Unknown`.
    #[test]
    fn a_pid_of_another_or_unknown_namespace_is_never_dead() {
        let me = me();
        let ours = me.pid_ns.expect("ns");
        let gone = "4195304:1"; // above the kernel's PID_MAX_LIMIT (2^22): never a pid
        for ns in [
            format!("pidns-{}", ours.wrapping_add(1)),
            "pidns-unknown".into(),
        ] {
            let owner = OwnerId::new(format!("proc:{}:{ns}:{gone}:abc", me.boot)).expect("id");
            assert_eq!(owner_liveness(&owner), Liveness::Unknown, "{owner}");
        }
        let old = OwnerId::new(format!("proc:{}:{gone}:abc", me.boot)).expect("id");
        assert_eq!(parse_owner(&old).expect("old form decodes").pid_ns, None);
        assert_eq!(owner_liveness(&old), Liveness::Unknown);
        // The same pid in our own namespace is dead.
        let same = OwnerId::new(format!("proc:{}:pidns-{ours}:{gone}:abc", me.boot)).expect("id");
        assert_eq!(owner_liveness(&same), Liveness::Dead);
    }

    /// The rule table of [`judge`], with a scripted `/proc`.
    #[test]
    fn liveness_rule_table() {
        // pid 10 runs with start time 5; pid 11 is a zombie; nothing else runs.
        let probe = |pid: u32| match pid {
            10 => Some((5, false)),
            11 => Some((5, true)),
            _ => None,
        };
        let owner = |boot: &str, ns: Option<u64>, pid: u32, start: u64| ProcessOwner {
            boot: boot.into(),
            pid_ns: ns,
            pid,
            start,
        };
        let here = |boot: Option<&'static str>, ns: Option<u64>, visible: bool| Observer {
            boot,
            pid_ns: ns,
            pid: 1,
            proc_visible: visible,
            probe: &probe,
        };
        use Liveness::{Alive, Dead, Unknown};
        let std_here = here(Some("b"), Some(7), true);
        let cases = [
            // (owner, observer, expected, why)
            (
                owner("b", Some(7), 10, 5),
                &std_here,
                Alive,
                "same ns, running",
            ),
            (owner("b", Some(7), 99, 5), &std_here, Dead, "same ns, gone"),
            (
                owner("b", Some(7), 11, 5),
                &std_here,
                Dead,
                "same ns, zombie",
            ),
            (
                owner("b", Some(7), 10, 6),
                &std_here,
                Dead,
                "same ns, pid recycled",
            ),
            (
                owner("b", Some(7), 1, 0),
                &std_here,
                Alive,
                "this very process",
            ),
            (
                owner("b", Some(8), 99, 5),
                &std_here,
                Unknown,
                "other ns, gone pid",
            ),
            (
                owner("b", Some(8), 10, 5),
                &std_here,
                Unknown,
                "other ns, live pid",
            ),
            (
                owner("b", Some(8), 1, 0),
                &std_here,
                Unknown,
                "other ns, our pid",
            ),
            (
                owner("b", None, 99, 5),
                &std_here,
                Unknown,
                "unknown or old-form ns",
            ),
            (owner("x", Some(7), 99, 5), &std_here, Unknown, "other boot"),
        ];
        for (o, h, expected, why) in cases {
            assert_eq!(judge(&o, h), expected, "{why}");
        }
        let no_ns_here = here(Some("b"), None, true);
        assert_eq!(
            judge(&owner("b", Some(7), 99, 5), &no_ns_here),
            Unknown,
            "our ns unknown"
        );
        let no_boot = here(None, Some(7), true);
        assert_eq!(
            judge(&owner("b", Some(7), 99, 5), &no_boot),
            Unknown,
            "our boot unknown"
        );
        let no_proc = here(Some("b"), Some(7), false);
        assert_eq!(
            judge(&owner("b", Some(7), 99, 5), &no_proc),
            Unknown,
            "no /proc"
        );
    }

    #[test]
    fn foreign_or_malformed_owners_are_unknown() {
        for text in [
            "tab-a",
            "proc:00000000:1:1:x",
            "proc:00000000:pidns-1:1:1:x",
            "proc:zz:1:1:x",
            "proc:abc",
            "proc:a:b:c:d",
            "proc:a:1:1:x:extra:more",
            "proc:a:ns-1:1:1:x",
            "proc:a:pidns-x:1:1:x",
        ] {
            let owner = OwnerId::new(text).expect("id");
            assert_eq!(owner_liveness(&owner), Liveness::Unknown, "{text}");
        }
    }
}
