//! The command line's tie to the process that started it (issue 38): a
//! foreground command (a run followed to its end, research, a decision)
//! gets SIGTERM when its parent goes away, and so ends as a signal ends it
//! (a run interrupted and resumable, S2.5; a research task stopped with its
//! report, S9.6) instead of going on unseen after a `timeout` wrapper or a
//! shell was killed. Daemons (`serve`, `worker`) and queued runs outlive
//! their parent by design and do not take this tie.
//!
//! Linux only (`prctl(PR_SET_PDEATHSIG)`); elsewhere nothing is done.

/// Ask the kernel for SIGTERM when the parent goes away; if it already did
/// (between the start and this call), exit at once with `code`.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn exit_with_parent(code: u8) {
    // SAFETY: getppid and prctl(PR_SET_PDEATHSIG, signal) read and set
    // process attributes; they touch no memory of this process.
    let (parent, set, now) = unsafe {
        let parent = libc::getppid();
        let set = libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
        (parent, set, libc::getppid())
    };
    if set == 0 && now != parent {
        std::process::exit(i32::from(code));
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn exit_with_parent(_code: u8) {}
