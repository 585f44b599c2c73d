//! A non-blocking datagram socket made and used with system calls alone
//! (`socket`, `fcntl`, `connect`, `send`, `recv`, the addresses on the
//! stack): no allocation, no lock, nothing that waits, so that a read of
//! the bounds may ask a daemon from a signal handler. chronyd's command
//! port (`chrony.rs`) and ptp4l's management socket (`ptp.rs`) are asked
//! through it.

use std::io;

/// The socket, closed on drop.
pub(crate) struct Datagram {
    fd: libc::c_int,
}

impl Datagram {
    /// A socket of `family`, close-on-exec and non-blocking, connected to
    /// the address `connect` gives (`bind` first binds it there, when
    /// given: its `(address, length)`).
    ///
    /// # Errors
    /// The OS's errno, where it refuses.
    pub(crate) fn connected(
        family: libc::c_int,
        bind: Option<(*const libc::sockaddr, libc::socklen_t)>,
        connect: (*const libc::sockaddr, libc::socklen_t),
    ) -> io::Result<Datagram> {
        // SAFETY: plain system calls on integers.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Owned from here: closed on every path out.
        let socket = Datagram { fd };
        // SAFETY: fcntl on our own descriptor; the callers' addresses are
        // valid for the lengths they give, which bind and connect read.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags < 0
                || libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) < 0
                || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
                || bind.is_some_and(|(address, len)| libc::bind(fd, address, len) < 0)
                || libc::connect(fd, connect.0, connect.1) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(socket)
    }

    /// Sends `packet`, without waiting.
    ///
    /// # Errors
    /// The OS's errno (a refusal the peer left on the socket).
    pub(crate) fn send(&self, packet: &[u8]) -> io::Result<()> {
        // SAFETY: sends our own buffer on our own descriptor.
        let sent = unsafe { libc::send(self.fd, packet.as_ptr().cast(), packet.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The next datagram into `buffer` (its length), without waiting: a
    /// `WouldBlock` error when none has come.
    ///
    /// # Errors
    /// The OS's errno: `WouldBlock`, or a refusal.
    pub(crate) fn receive(&self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: receives into our own buffer, at most its length.
            let n = unsafe { libc::recv(self.fd, buffer.as_mut_ptr().cast(), buffer.len(), 0) };
            match usize::try_from(n) {
                Ok(n) => return Ok(n),
                Err(_) => match io::Error::last_os_error() {
                    e if e.kind() == io::ErrorKind::Interrupted => continue,
                    e => return Err(e),
                },
            }
        }
    }

    /// The socket's own port (for the tests: a forked child's is its own).
    #[cfg(test)]
    pub(crate) fn local_port(&self) -> u16 {
        // SAFETY: getsockname writes at most `len` bytes into our storage.
        unsafe {
            let mut storage: libc::sockaddr_in6 = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            libc::getsockname(self.fd, (&raw mut storage).cast(), &mut len);
            // The port is at the same place in both families.
            u16::from_be(storage.sin6_port)
        }
    }
}

impl Drop for Datagram {
    fn drop(&mut self) {
        // SAFETY: closes our own descriptor, once.
        unsafe { libc::close(self.fd) };
    }
}
