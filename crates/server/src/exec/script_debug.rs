//! The server's half of the Lua debugger (`SCRIPT DEBUG`, Redis's LDB):
//! the client's debug mode, and the channel the debugger in
//! `vireo_script` talks to the client over.
//!
//! **How a session runs.** After `SCRIPT DEBUG YES|SYNC` the client's next
//! EVAL (or EVAL_RO) runs under the debugger (`exec::script`), with every
//! shard locked. While the script is stopped, the worker serving the client
//! does blocking I/O on the client's socket from inside the Lua hook, as
//! Redis does: the debugger's replies go straight to the socket and its
//! commands are read from it, bypassing the connection's buffers (whatever
//! replies were pending are written first). When the script ends, the
//! session's last lines and `<endsession>` are written, then the script's
//! reply through the ordinary path, and the connection is closed.
//!
//! **SYNC** is Redis's synchronous mode: the dataset changes the script
//! makes are kept, and the server is held while the client debugs (here:
//! every shard, and the worker the client is on; other workers keep
//! answering commands that need no shard, such as PING).
//!
//! **YES** is Redis's forked mode, where the script runs in a forked child
//! whose writes vanish with it. Vireo does not fork: a YES session runs
//! like a SYNC one, but before each write the script calls, the keys the
//! command names are saved as they were (once per key), the command's
//! effects are kept out of the AOF and the replication stream, and when the
//! script ends every saved key is put back, so the dataset is as before the
//! session. Writes whose keys cannot be saved that way (the whole keyspace,
//! or another database: FLUSHALL, SWAPDB, MOVE, COPY, SORT's STORE …) are
//! refused with an error. What cannot be taken back is what other clients
//! saw while it ran: keyspace notifications, client-side caching
//! invalidations, WATCHed keys marked changed. Unlike Redis, the server is
//! held during a YES session as during a SYNC one.
//!
//! The Lua time limit (`busy-reply-threshold`) does not apply: a script
//! is never answered `-BUSY` or killable while debugged. Instead, as in
//! Redis, one that runs that long (5 s when the limit is 0) without
//! stopping is stopped by the debugger ("timeout reached"). A client that
//! disconnects ends the stepping: the script runs to its end unattended
//! (or fails, if it was stopped for running too long).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use vireo_script::DebugChannel;

/// How long writing to the debugging client may block (Redis's send
/// timeout on the debugging connection).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The time limit a debugged script runs under without stopping when
/// `busy-reply-threshold` is 0 (Redis's default for the debugger).
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(5);

/// A client's SCRIPT DEBUG mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugMode {
    /// SCRIPT DEBUG YES: writes undone when the session ends (see the
    /// module comment).
    Forked,
    /// SCRIPT DEBUG SYNC: writes kept.
    Sync,
}

/// The debugging client's socket, borrowed by its file descriptor for the
/// session (the connection keeps owning it). The socket stays
/// non-blocking; waits use `poll`.
pub struct SocketChannel {
    fd: RawFd,
}

impl SocketChannel {
    /// A channel over the plain (TCP or unix) socket `fd`, which must stay
    /// open for the channel's life: the connection that owns it is the
    /// one running the session.
    pub fn new(fd: RawFd) -> SocketChannel {
        SocketChannel { fd }
    }

    /// Waits until the socket is ready for `events`, up to `timeout`
    /// (None: no limit). False on timeout.
    fn wait(&self, events: libc::c_short, timeout: Option<Duration>) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
        loop {
            // SAFETY: `pfd` is a valid, initialised pollfd and the count is 1.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n >= 0 {
                return Ok(n > 0);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl DebugChannel for SocketChannel {
    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            // SAFETY: `bytes` is a valid buffer of `bytes.len()` bytes.
            let n = unsafe { libc::write(self.fd, bytes.as_ptr().cast(), bytes.len()) };
            if n > 0 {
                bytes = &bytes[n as usize..];
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => {
                    if !self.wait(libc::POLLOUT, Some(SEND_TIMEOUT))? {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                _ => return Err(e),
            }
        }
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is a valid writable buffer of `buf.len()` bytes.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => {
                    self.wait(libc::POLLIN, None)?;
                }
                _ => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn channel_reads_and_writes_a_nonblocking_socket() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut ch = SocketChannel::new(ours.as_raw_fd());
        ch.write_all(b"*1\r\n+hello\r\n").unwrap();
        let mut got = [0u8; 12];
        theirs.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"*1\r\n+hello\r\n");
        // The read waits for the peer's bytes (written from another thread).
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            theirs.write_all(b"ab").unwrap();
            theirs
        });
        let mut buf = [0u8; 8];
        let n = ch.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ab");
        drop(writer.join().unwrap());
        assert_eq!(ch.read(&mut buf).unwrap(), 0, "closed peer reads as EOF");
    }
}
