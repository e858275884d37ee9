//! The name of this server process among the nodes that may share one database.

use std::fmt;
use std::str::FromStr;

/// A node's name. It is printed in the log, labels the node's metric, and answers in
/// `/healthz` and `/readyz`, so that behind a load balancer an operator can tell which
/// process said what; with several nodes on one database it is also what the
/// connections a node holds are recorded under. It goes verbatim into log fields and
/// metric labels, hence the narrow alphabet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeId(String);

/// A `--node-id` that does not fit [`NodeId`]'s alphabet or length.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a node id is 1 to {max} letters, digits, '.', '_' or '-' (got {0:?})",
    max = NodeId::MAX_LEN
)]
pub struct InvalidNodeId(pub String);

impl NodeId {
    /// Longest accepted name: room for a host name and a suffix, short enough for a
    /// metric label.
    pub const MAX_LEN: usize = 64;

    /// Checks an operator's `--node-id`.
    pub fn parse(text: &str) -> Result<NodeId, InvalidNodeId> {
        if switchboard_types::ids::fits_id_alphabet(text, Self::MAX_LEN) {
            Ok(NodeId(text.to_owned()))
        } else {
            Err(InvalidNodeId(text.to_owned()))
        }
    }

    /// The name of a node started without `--node-id`: new at every start, so a
    /// restarted process is never taken for its earlier self (whose connections are
    /// gone) by the nodes that share its database.
    pub fn generate() -> NodeId {
        let random = uuid::Uuid::new_v4().simple().to_string();
        NodeId(format!("node-{}", &random[..8]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for NodeId {
    type Err = InvalidNodeId;

    fn from_str(text: &str) -> Result<NodeId, InvalidNodeId> {
        NodeId::parse(text)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::NodeId;

    #[test]
    fn names_of_the_narrow_alphabet_are_accepted() {
        for good in ["a", "east-1", "node_2.prod", &"x".repeat(NodeId::MAX_LEN)] {
            assert_eq!(
                NodeId::parse(good).map(|n| n.to_string()),
                Ok(good.to_owned())
            );
        }
    }

    #[test]
    fn empty_long_or_foreign_names_are_refused() {
        let long = "x".repeat(NodeId::MAX_LEN + 1);
        for bad in ["", "a b", "a\"b", "ä", "a\nb", "a{b}", long.as_str()] {
            let err = NodeId::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("1 to 64 letters"), "{err}");
        }
    }

    #[test]
    fn generated_names_are_valid_and_differ() {
        let (a, b) = (NodeId::generate(), NodeId::generate());
        assert_ne!(a, b);
        for n in [a, b] {
            assert_eq!(NodeId::parse(n.as_str()), Ok(n.clone()));
            assert!(
                n.as_str().starts_with("node-") && n.as_str().len() == 13,
                "{n}"
            );
        }
    }
}
