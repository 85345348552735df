//! Where a group's status type lives: [`proto::status`], shared with the peer protocol.
pub use proto::status::GroupStatus;
