//! `Service`: which handler a request frame is for. Each service has its own connection per peer
//! (so Raft never queues behind slow forwarded requests); the code in the frame header routes the
//! request on the receiving node. Not here: the
//! handlers themselves ([`super::Handler`]) or the payload formats (each service owns its own).

/// A service reachable over the peer transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// Raft RPC of every group on the node (AppendEntries, Vote, InstallSnapshot), served by
    /// [`crate::network::RaftRouter`].
    Raft,
    /// Requests the node crate forwards to the node that leads a partition; the node registers
    /// its own handler.
    Forward,
}

impl Service {
    /// Every service, for iteration in a stable order.
    pub const ALL: [Service; 2] = [Service::Raft, Service::Forward];

    /// The frame code of the service. Code 0 is the connection hello, never a service.
    pub fn code(self) -> u8 {
        match self {
            Service::Raft => 1,
            Service::Forward => 2,
        }
    }

    /// The service with frame code `code`, if any.
    pub fn from_code(code: u8) -> Option<Service> {
        Service::ALL.into_iter().find(|s| s.code() == code)
    }
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Service::Raft => "raft",
            Service::Forward => "forward",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_skip_the_hello() {
        for service in Service::ALL {
            assert_ne!(service.code(), super::super::frame::CODE_HELLO);
            assert_eq!(Service::from_code(service.code()), Some(service));
        }
        assert_eq!(Service::from_code(0), None);
        assert_eq!(Service::from_code(200), None);
    }
}
