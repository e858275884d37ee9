//! STOMP (issue #12): Wise Agents processes, and any STOMP client, using Switchboard as
//! their broker.
//!
//! Built so far: [`frame`], the wire codec (1.0, 1.1 and 1.2, as stomp.py speaks them),
//! tested against the specification's examples, and [`wise`], the gate a Wise Agents
//! body must pass to be relayed and the body written for a Wise Agents receiver. The
//! session (CONNECT/STOMP, identity by agent token or team bridge,
//! `/queue/request/<agent>` and `/queue/response/<agent>` on the inbox), the TCP listener
//! (`--stomp-listen`) and STOMP over WebSocket (`/v1/stomp`) build on them.

pub mod frame;
pub mod wise;
