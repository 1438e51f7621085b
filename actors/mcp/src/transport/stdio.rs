//! stdio (native only): the configured command started directly (no
//! shell) with its arguments, the environment cleared except the names in
//! `env_allow`; newline-delimited JSON on stdin and stdout, each line at
//! most [`MAX_MESSAGE_BYTES`]; stderr drained and bounded (its last
//! [`STDERR_TAIL_BYTES`] kept for error messages). The pipes are served by
//! three plain threads (no async runtime named here): no pipe is read or
//! written on the caller's executor. Messages reach the writer thread
//! through a bounded channel of [`STDIN_QUEUE`] lines; a server that stops
//! reading its stdin blocks only that thread, a request waits for its line
//! to be written asynchronously (within the client's deadline), and once
//! the queue is full further messages are refused at once. The child is
//! killed and reaped when the transport is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{Inbound, InboundSink, Transport};
use crate::error::McpError;
use crate::jsonrpc::{MAX_MESSAGE_BYTES, RequestId, parse_server_messages};

/// How much of the server's stderr is kept, at most (the end of it).
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// Lines waiting for the stdin writer thread, at most.
pub const STDIN_QUEUE: usize = 64;

/// One line for the writer thread, and where to say it was written.
struct Outgoing {
    line: Vec<u8>,
    written: Option<async_channel::Sender<std::io::Result<()>>>,
}

/// The last bytes the server wrote to stderr.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = match self.0.lock() {
            Ok(t) => t,
            Err(p) => p.into_inner(),
        };
        tail.extend_from_slice(bytes);
        if tail.len() > STDERR_TAIL_BYTES {
            let cut = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..cut);
        }
    }

    /// The kept text (lossy UTF-8).
    pub fn text(&self) -> String {
        let tail = match self.0.lock() {
            Ok(t) => t,
            Err(p) => p.into_inner(),
        };
        String::from_utf8_lossy(&tail).into_owned()
    }
}

/// A server process speaking MCP on its stdin and stdout.
pub struct StdioTransport {
    command: String,
    /// To the stdin writer thread; closed (taken) when dropped.
    stdin: Mutex<Option<async_channel::Sender<Outgoing>>>,
    child: Mutex<Child>,
    stderr: StderrTail,
}

impl StdioTransport {
    /// Start `command args...` with only `env_allow`'s variables (those set
    /// in this process) in its environment.
    pub fn spawn(
        command: &str,
        args: &[String],
        env_allow: &[String],
        sink: InboundSink,
    ) -> Result<StdioTransport, McpError> {
        let mut cmd = Command::new(command);
        cmd.args(args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in env_allow {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        let mut child = cmd.spawn().map_err(|e| McpError::Transport {
            detail: format!("cannot start {command:?}: {e}"),
            sent: false,
        })?;
        let missing = || McpError::Transport {
            detail: "the child's pipes are missing".into(),
            sent: false,
        };
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr = child.stderr.take().ok_or_else(missing)?;
        let tail = StderrTail::default();
        {
            let tail = tail.clone();
            std::thread::spawn(move || drain_stderr(stderr, &tail));
        }
        {
            let tail = tail.clone();
            let command = command.to_owned();
            std::thread::spawn(move || read_stdout(stdout, &sink, &tail, &command));
        }
        let (queue, lines) = async_channel::bounded(STDIN_QUEUE);
        std::thread::spawn(move || write_stdin(stdin, &lines));
        Ok(StdioTransport {
            command: command.to_owned(),
            stdin: Mutex::new(Some(queue)),
            child: Mutex::new(child),
            stderr: tail,
        })
    }

    /// The end of what the server wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Closing stdin first lets a well-behaved server exit; the kill
        // makes sure, and wait reaps it (no zombie).
        if let Ok(mut stdin) = self.stdin.lock() {
            stdin.take();
        }
        let child = match self.child.get_mut() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The writer thread: one line at a time, in order, until the queue is
/// closed or a write fails (the server is gone).
fn write_stdin(mut stdin: ChildStdin, lines: &async_channel::Receiver<Outgoing>) {
    while let Ok(out) = lines.recv_blocking() {
        let result = stdin.write_all(&out.line).and_then(|()| stdin.flush());
        let failed = result.is_err();
        if let Some(written) = out.written {
            let _ = written.send_blocking(result);
        }
        if failed {
            return;
        }
    }
}

fn drain_stderr(mut stderr: std::process::ChildStderr, tail: &StderrTail) {
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => tail.push(&buf[..n]),
        }
    }
}

fn read_stdout(
    stdout: std::process::ChildStdout,
    sink: &InboundSink,
    tail: &StderrTail,
    command: &str,
) {
    let mut reader = BufReader::new(stdout);
    let mut line: Vec<u8> = Vec::new();
    let closed = loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) => break format!("reading its output failed: {e}"),
        };
        if available.is_empty() {
            break "the server process ended".to_owned();
        }
        let (used, complete) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&available[..i]);
                (i + 1, true)
            }
            None => {
                line.extend_from_slice(available);
                (available.len(), false)
            }
        };
        reader.consume(used);
        if line.len() > MAX_MESSAGE_BYTES + 1 {
            sink.deliver_blocking(Inbound::Closed(McpError::TooLarge {
                size: line.len(),
                limit: MAX_MESSAGE_BYTES,
            }));
            return;
        }
        if !complete {
            continue;
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let text = std::mem::take(&mut line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_server_messages(&text) {
            Ok(messages) => {
                for m in messages {
                    if !sink.deliver_blocking(Inbound::Message(m)) {
                        return;
                    }
                }
            }
            // A line that is not a message is a broken server: say so and close.
            Err(e) => {
                sink.deliver_blocking(Inbound::Closed(e));
                return;
            }
        }
    };
    // Give stderr's drain a moment to catch the last words.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let stderr = tail.text();
    let stderr = stderr.trim();
    sink.deliver_blocking(Inbound::Closed(McpError::Closed(if stderr.is_empty() {
        format!("{command}: {closed}")
    } else {
        format!("{command}: {closed}; its stderr ends with: {stderr}")
    })));
}

#[async_trait::async_trait]
impl Transport for StdioTransport {
    async fn send(&self, message: &Value, request: Option<&RequestId>) -> Result<(), McpError> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| McpError::Protocol(format!("cannot encode a message: {e}")))?;
        line.push(b'\n');
        let queue = match self.stdin.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let closed = || McpError::Closed(format!("{}: stdin is closed", self.command));
        let Some(queue) = queue else {
            return Err(closed());
        };
        // A request waits (asynchronously) until its line is written; a
        // notification or an answer is only queued.
        let (written, done) = match request {
            Some(_) => {
                let (tx, rx) = async_channel::bounded(1);
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        queue
            .try_send(Outgoing { line, written })
            .map_err(|e| match e {
                async_channel::TrySendError::Full(_) => McpError::Transport {
                    detail: format!(
                        "{}: the server has not read its input ({STDIN_QUEUE} messages are waiting)",
                        self.command
                    ),
                    sent: false,
                },
                async_channel::TrySendError::Closed(_) => closed(),
            })?;
        let Some(done) = done else {
            return Ok(());
        };
        match done.recv().await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(McpError::Transport {
                detail: format!(
                    "{}: writing to the server failed ({e}); its stderr ends with: {}",
                    self.command,
                    self.stderr_tail().trim()
                ),
                sent: false,
            }),
            Err(_) => Err(closed()),
        }
    }

    async fn initialized(&self, _version: &str) {}

    fn reset_session(&self) {}

    fn describe(&self) -> String {
        format!("the process {}", self.command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real child that never reads its stdin (`sleep`): messages of
    /// 128 KiB (more than a pipe buffer) stop the writer thread on the
    /// first; the queue then takes [`STDIN_QUEUE`] more and refuses the
    /// next at once, typed, without blocking the caller. Below the limit
    /// every message is accepted; above it every one is refused.
    #[test]
    fn the_stdin_queue_is_bounded_at_below_and_above() {
        let (router, _inbox) = async_channel::unbounded();
        let transport =
            StdioTransport::spawn("/bin/sleep", &["600".to_owned()], &[], InboundSink(router))
                .unwrap();
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": { "data": "x".repeat(128 * 1024) },
        });
        let mut accepted = 0usize;
        let refused = loop {
            match futures::executor::block_on(transport.send(&note, None)) {
                Ok(()) => accepted += 1,
                Err(e) => break e,
            }
            assert!(accepted <= STDIN_QUEUE + 1, "the queue is not bounded");
        };
        // The writer thread may or may not have taken the first line yet.
        assert!(
            accepted == STDIN_QUEUE || accepted == STDIN_QUEUE + 1,
            "{accepted} accepted"
        );
        assert!(
            matches!(&refused, McpError::Transport { sent: false, detail } if detail.contains("has not read its input")),
            "{refused:?}"
        );
        for _ in 0..3 {
            assert!(futures::executor::block_on(transport.send(&note, None)).is_err());
        }
    }
}
