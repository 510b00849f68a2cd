//! The loop guard: stops an agent that is going round in circles before it burns its budget.
//!
//! In the spirit of the reference system's guard, it watches four patterns over one run and warns
//! before it blocks, so a model that is merely retrying gets a chance to change course:
//! - the same call (tool and arguments) repeated;
//! - the same call giving the same outcome repeated (retrying something that cannot change);
//! - ping-pong: two calls alternating (A, B, A, B, ...);
//! - a global breaker on the total number of calls in the run.

use std::collections::HashMap;

use portico_pipeline::arguments_digest;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopGuardSettings {
    pub repeat_warn: u32,
    pub repeat_block: u32,
    pub same_outcome_warn: u32,
    pub same_outcome_block: u32,
    /// Alternations (A, B counts as one) before warning and blocking.
    pub ping_pong_warn: u32,
    pub ping_pong_block: u32,
    pub max_calls: u32,
}

impl Default for LoopGuardSettings {
    fn default() -> Self {
        LoopGuardSettings {
            repeat_warn: 3,
            repeat_block: 5,
            same_outcome_warn: 2,
            same_outcome_block: 3,
            ping_pong_warn: 3,
            ping_pong_block: 4,
            max_calls: 50,
        }
    }
}

/// What the guard says about a call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Run it, and tell the model (appended to the result) that it looks like a loop.
    Warn(String),
    /// Do not run it; the model gets this message instead of a result.
    Block(String),
    /// Stop the whole run.
    Break(String),
}

#[derive(Debug, Default)]
pub struct LoopGuard {
    settings: LoopGuardSettings,
    calls: u32,
    repeats: HashMap<String, u32>,
    outcomes: HashMap<String, u32>,
    history: Vec<String>,
}

impl LoopGuard {
    pub fn new(settings: LoopGuardSettings) -> Self {
        LoopGuard {
            settings,
            ..LoopGuard::default()
        }
    }

    fn call_key(tool: &str, arguments: &Value) -> String {
        format!("{tool}:{}", arguments_digest(arguments))
    }

    /// Judges a call before it runs, and counts it.
    pub fn before(&mut self, tool: &str, arguments: &Value) -> Verdict {
        let s = self.settings;
        self.calls += 1;
        if self.calls > s.max_calls {
            return Verdict::Break(format!(
                "loop guard: this run made more than {} tool calls; stopping",
                s.max_calls
            ));
        }
        let key = Self::call_key(tool, arguments);
        self.history.push(key.clone());
        let repeats = self.repeats.entry(key.clone()).or_default();
        *repeats += 1;
        let repeats = *repeats;
        let same_outcomes = self
            .outcomes
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{key}=")))
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);

        if same_outcomes >= s.same_outcome_block {
            return Verdict::Block(format!(
                "loop guard: `{tool}` was called {same_outcomes} times with these arguments and gave \
                 the same result each time; not calling it again. Use the result you have or try \
                 something different."
            ));
        }
        if repeats >= s.repeat_block {
            return Verdict::Block(format!(
                "loop guard: `{tool}` was called {repeats} times with identical arguments; blocked. \
                 Try something different or give your answer."
            ));
        }
        let alternations = self.ping_pong();
        if alternations >= s.ping_pong_block {
            return Verdict::Block(format!(
                "loop guard: calls are alternating between the same two tool calls \
                 ({alternations} rounds); blocked. Give your answer or change approach."
            ));
        }
        if same_outcomes >= s.same_outcome_warn {
            return Verdict::Warn(format!(
                "loop guard: `{tool}` gave the same result for these arguments {same_outcomes} times \
                 before; calling it again will not change it."
            ));
        }
        if alternations >= s.ping_pong_warn {
            return Verdict::Warn(format!(
                "loop guard: calls are alternating between the same two tool calls ({alternations} \
                 rounds); this looks like a loop."
            ));
        }
        if repeats >= s.repeat_warn {
            return Verdict::Warn(format!(
                "loop guard: `{tool}` has now been called {repeats} times with identical arguments; \
                 at {} it will be blocked.",
                s.repeat_block
            ));
        }
        Verdict::Allow
    }

    /// Records what a call returned, for the same-outcome rule.
    pub fn after(&mut self, tool: &str, arguments: &Value, result_text: &str) {
        let key = format!(
            "{}={}",
            Self::call_key(tool, arguments),
            arguments_digest(&Value::String(result_text.to_string()))
        );
        *self.outcomes.entry(key).or_default() += 1;
    }

    /// How many A,B rounds the tail of the history alternates between two distinct calls.
    fn ping_pong(&self) -> u32 {
        let h = &self.history;
        if h.len() < 4 {
            return 0;
        }
        let a = &h[h.len() - 1];
        let b = &h[h.len() - 2];
        if a == b {
            return 0;
        }
        let mut length = 0;
        for (i, call) in h.iter().rev().enumerate() {
            let expected = if i % 2 == 0 { a } else { b };
            if call != expected {
                break;
            }
            length += 1;
        }
        (length / 2) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identical_calls_warn_then_block() {
        let mut guard = LoopGuard::new(LoopGuardSettings::default());
        let args = json!({"q": 1});
        assert_eq!(guard.before("t", &args), Verdict::Allow);
        assert_eq!(guard.before("t", &args), Verdict::Allow);
        assert!(matches!(guard.before("t", &args), Verdict::Warn(m) if m.contains("3 times")));
        assert!(matches!(guard.before("t", &args), Verdict::Warn(_)));
        assert!(matches!(guard.before("t", &args), Verdict::Block(m) if m.contains("5 times")));
        // Other arguments are a different call.
        assert_eq!(guard.before("t", &json!({"q": 2})), Verdict::Allow);
    }

    #[test]
    fn identical_outcomes_block_sooner() {
        let mut guard = LoopGuard::new(LoopGuardSettings::default());
        let args = json!({"q": 1});
        assert_eq!(guard.before("t", &args), Verdict::Allow);
        guard.after("t", &args, "same");
        assert_eq!(guard.before("t", &args), Verdict::Allow);
        guard.after("t", &args, "same");
        assert!(matches!(guard.before("t", &args), Verdict::Warn(m) if m.contains("same result")));
        guard.after("t", &args, "same");
        assert!(matches!(guard.before("t", &args), Verdict::Block(m) if m.contains("same result")));
    }

    #[test]
    fn changing_outcomes_do_not_trip_the_outcome_rule() {
        let mut guard = LoopGuard::new(LoopGuardSettings::default());
        let args = json!({});
        assert_eq!(guard.before("poll", &args), Verdict::Allow);
        guard.after("poll", &args, "1");
        assert_eq!(guard.before("poll", &args), Verdict::Allow);
        guard.after("poll", &args, "2");
        assert!(
            matches!(guard.before("poll", &args), Verdict::Warn(m) if m.contains("identical arguments"))
        );
    }

    #[test]
    fn ping_pong_is_caught() {
        let mut guard = LoopGuard::new(LoopGuardSettings::default());
        let (a, b) = (json!({"x": "a"}), json!({"x": "b"}));
        let mut verdicts = Vec::new();
        for _ in 0..4 {
            verdicts.push(guard.before("t", &a));
            verdicts.push(guard.before("u", &b));
        }
        assert_eq!(
            verdicts[..4],
            [
                Verdict::Allow,
                Verdict::Allow,
                Verdict::Allow,
                Verdict::Allow
            ]
        );
        // The third `a` is also a plain repeat.
        assert!(
            matches!(&verdicts[4], Verdict::Warn(m) if m.contains("identical arguments")),
            "{verdicts:?}"
        );
        assert!(
            matches!(&verdicts[5], Verdict::Warn(m) if m.contains("alternating")),
            "{verdicts:?}"
        );
        assert!(
            matches!(&verdicts[7], Verdict::Block(m) if m.contains("alternating")),
            "{verdicts:?}"
        );
    }

    #[test]
    fn global_breaker_stops_the_run() {
        let mut guard = LoopGuard::new(LoopGuardSettings {
            max_calls: 3,
            ..LoopGuardSettings::default()
        });
        for i in 0..3 {
            assert_eq!(guard.before("t", &json!({"i": i})), Verdict::Allow);
        }
        assert!(matches!(
            guard.before("t", &json!({"i": 9})),
            Verdict::Break(_)
        ));
    }
}
