//! The drivers end to end: the HTTP drivers against fake provider servers on loopback, the scripted
//! driver through its scripts, the sampling driver through a fake calling client.

mod anthropic;
mod fake;
mod openai;
mod sampling;
mod scripted;
