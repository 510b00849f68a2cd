//! Which upstream runs a task a client created through this door (the MCP tasks extension), so its
//! `tasks/get`, `tasks/update` and `tasks/cancel` reach that upstream, from that client only.
//!
//! Shared by every session: a 2026-07-28 client polls from new connections. Keyed by the client and
//! the task id, so tasks of two upstreams that use the same ids are never mistaken for each other:
//! another client's task never touches a client's route, and a client whose new task has the id of
//! one it has on another upstream is refused that task (which is then cancelled) rather than lose
//! the first (once its task is seen final, the id is free again). Bounded in all and per client. A route goes when its ttl runs out; once its task is seen final it stays readable (the
//! upstream still answers for it, and a client may read the result again) but no longer counts
//! against its client's bound, and final routes are the first dropped when the map is full.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Tasks routed at once, over all clients.
pub const MAX_ROUTED_TASKS: usize = 1024;
/// Tasks routed at once for one client identity.
pub const MAX_ROUTED_TASKS_PER_CLIENT: usize = 64;
/// How long a route lives when the server gave its task no ttl, and the longest it lives anyway.
pub const MAX_TASK_ROUTE_TTL: Duration = Duration::from_secs(3600);

struct Route {
    server: String,
    expires: Instant,
    /// Its task was seen completed, failed or cancelled.
    settled: bool,
}

/// A route's key: the client identity that created the task, and the task's id.
type RouteKey = (String, String);

fn key(owner: &str, task_id: &str) -> RouteKey {
    (owner.to_string(), task_id.to_string())
}

/// The routes of the tasks relayed through this door.
#[derive(Clone)]
pub struct TaskRoutes {
    routes: Arc<Mutex<HashMap<RouteKey, Route>>>,
    max: usize,
    max_per_client: usize,
}

impl Default for TaskRoutes {
    fn default() -> Self {
        TaskRoutes::with_limits(MAX_ROUTED_TASKS, MAX_ROUTED_TASKS_PER_CLIENT)
    }
}

/// Why a task could not be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskRouteError {
    #[error(
        "client `{owner}` already has {max} tasks running through Portico; wait for one to finish (poll it to its end) or cancel one"
    )]
    ClientFull { owner: String, max: usize },
    #[error("Portico already routes {max} tasks; retry once some have finished")]
    Full { max: usize },
    #[error(
        "server `{server}` gave the new task the id `{task_id}`, which this client's task on server `{other}` already has; retry the call once that task has finished and expired, or ask the server's operator to use unique task ids"
    )]
    Clash {
        task_id: String,
        server: String,
        other: String,
    },
}

impl TaskRoutes {
    pub fn with_limits(max: usize, max_per_client: usize) -> Self {
        TaskRoutes {
            routes: Arc::default(),
            max,
            max_per_client,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RouteKey, Route>> {
        // Every operation leaves the map consistent; poison from a panic elsewhere is moot.
        self.routes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records that `server` runs `task_id` for `owner`, for `ttl` (the task's own, capped).
    pub fn record(
        &self,
        task_id: &str,
        server: &str,
        owner: &str,
        ttl: Option<Duration>,
    ) -> Result<(), TaskRouteError> {
        let now = Instant::now();
        let key = key(owner, task_id);
        let mut routes = self.lock();
        routes.retain(|_, route| route.expires > now);
        // A finished task of this client gives its id way (the client has seen its end); a
        // running one keeps it, and the newcomer is refused.
        if let Some(route) = routes.get(&key)
            && route.server != server
            && !route.settled
        {
            return Err(TaskRouteError::Clash {
                task_id: task_id.to_string(),
                server: server.to_string(),
                other: route.server.clone(),
            });
        }
        // The same server naming a task of this client again replaces its route, not counted
        // twice (and kept if the new one is refused).
        let replaced = routes.contains_key(&key);
        let owned = routes
            .iter()
            .filter(|(route_key, route)| {
                route_key.0 == owner && !route.settled && **route_key != key
            })
            .count();
        if owned >= self.max_per_client {
            return Err(TaskRouteError::ClientFull {
                owner: owner.to_string(),
                max: self.max_per_client,
            });
        }
        if !replaced && routes.len() >= self.max {
            // Settled routes make room, the one expiring first first.
            let oldest_settled = routes
                .iter()
                .filter(|(_, route)| route.settled)
                .min_by_key(|(_, route)| route.expires)
                .map(|(id, _)| id.clone());
            match oldest_settled {
                Some(id) => {
                    routes.remove(&id);
                }
                None => return Err(TaskRouteError::Full { max: self.max }),
            }
        }
        let ttl = ttl.unwrap_or(MAX_TASK_ROUTE_TTL).min(MAX_TASK_ROUTE_TTL);
        routes.insert(
            key,
            Route {
                server: server.to_string(),
                expires: now + ttl,
                settled: false,
            },
        );
        Ok(())
    }

    /// The server running `task_id`, if `owner` created it and it has not expired.
    pub fn server_of(&self, task_id: &str, owner: &str) -> Option<String> {
        let now = Instant::now();
        self.lock()
            .get(&key(owner, task_id))
            .filter(|route| route.expires > now)
            .map(|route| route.server.clone())
    }

    /// Forgets `owner`'s `task_id`.
    pub fn forget(&self, task_id: &str, owner: &str) {
        self.lock().remove(&key(owner, task_id));
    }

    /// Marks `owner`'s `task_id` settled: its task was seen completed, failed or cancelled.
    pub fn settle(&self, task_id: &str, owner: &str) {
        if let Some(route) = self.lock().get_mut(&key(owner, task_id)) {
            route.settled = true;
        }
    }

    /// How many routes are held (for tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_is_its_owners_only() {
        let routes = TaskRoutes::default();
        routes.record("t1", "fixture", "client:a", None).unwrap();
        assert_eq!(
            routes.server_of("t1", "client:a").as_deref(),
            Some("fixture")
        );
        assert_eq!(routes.server_of("t1", "client:b"), None);
        assert_eq!(routes.server_of("t2", "client:a"), None);
        routes.forget("t1", "client:a");
        assert_eq!(routes.server_of("t1", "client:a"), None);
        assert!(routes.is_empty());
    }

    #[test]
    fn routes_are_bounded_per_client_and_in_all() {
        let routes = TaskRoutes::with_limits(3, 2);
        routes.record("a1", "s", "a", None).unwrap();
        routes.record("a2", "s", "a", None).unwrap();
        assert_eq!(
            routes.record("a3", "s", "a", None),
            Err(TaskRouteError::ClientFull {
                owner: "a".into(),
                max: 2
            })
        );
        routes.record("b1", "s", "b", None).unwrap();
        assert_eq!(
            routes.record("c1", "s", "c", None),
            Err(TaskRouteError::Full { max: 3 })
        );
        assert_eq!(routes.len(), 3);

        // A settled task frees its client's place, and is what a full map drops first.
        routes.settle("a1", "a");
        routes.record("a3", "s", "a", None).unwrap();
        assert_eq!(routes.server_of("a1", "a"), None);
        assert_eq!(routes.server_of("a2", "a").as_deref(), Some("s"));
        assert_eq!(routes.server_of("a3", "a").as_deref(), Some("s"));
        assert_eq!(routes.len(), 3);
    }

    #[test]
    fn a_settled_route_stays_readable_for_its_owner() {
        let routes = TaskRoutes::with_limits(4, 1);
        routes.record("t1", "s", "a", None).unwrap();
        routes.settle("t1", "a");
        routes.record("t2", "s", "a", None).unwrap();
        assert_eq!(routes.server_of("t1", "a").as_deref(), Some("s"));
        assert_eq!(routes.server_of("t1", "b"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_route_is_gone_and_frees_its_place() {
        let routes = TaskRoutes::with_limits(1, 1);
        routes
            .record("t1", "s", "a", Some(Duration::from_secs(5)))
            .unwrap();
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(routes.server_of("t1", "a"), None);
        routes.record("t2", "s", "a", None).unwrap();
        assert_eq!(routes.len(), 1);
    }

    /// Regression test: routes were keyed by task id alone, so a second upstream using the same
    /// ids overwrote the first one's route (here `b`'s task `task-1` on server `y` took `a`'s).
    #[test]
    fn the_same_task_id_on_two_upstreams_never_overwrites_a_route() {
        let routes = TaskRoutes::default();
        routes.record("task-1", "x", "a", None).unwrap();
        routes.record("task-1", "y", "b", None).unwrap();
        assert_eq!(routes.server_of("task-1", "a").as_deref(), Some("x"));
        assert_eq!(routes.server_of("task-1", "b").as_deref(), Some("y"));

        // One client cannot have two tasks of one id: the newcomer is refused, the first kept.
        assert_eq!(
            routes.record("task-1", "y", "a", None),
            Err(TaskRouteError::Clash {
                task_id: "task-1".into(),
                server: "y".into(),
                other: "x".into(),
            })
        );
        assert_eq!(routes.server_of("task-1", "a").as_deref(), Some("x"));
        // Settling or forgetting one client's task leaves the other's alone.
        routes.settle("task-1", "b");
        routes.forget("task-1", "b");
        assert_eq!(routes.server_of("task-1", "a").as_deref(), Some("x"));
        assert_eq!(routes.len(), 1);
        // Once the client's task is seen final, a new task of that id on another server takes
        // the id.
        routes.settle("task-1", "a");
        routes.record("task-1", "y", "a", None).unwrap();
        assert_eq!(routes.server_of("task-1", "a").as_deref(), Some("y"));
    }

    #[test]
    fn a_refused_task_leaves_the_route_it_would_have_replaced() {
        let routes = TaskRoutes::with_limits(4, 1);
        routes.record("t1", "s", "a", None).unwrap();
        // At its bound with t1; t1 named again replaces it, t2 is refused and t1 stays.
        routes.record("t1", "s", "a", None).unwrap();
        assert!(matches!(
            routes.record("t2", "s", "a", None),
            Err(TaskRouteError::ClientFull { .. })
        ));
        assert_eq!(routes.server_of("t1", "a").as_deref(), Some("s"));
        assert_eq!(routes.len(), 1);
    }

    #[test]
    fn a_server_naming_a_task_again_replaces_its_route_without_counting_it_twice() {
        let routes = TaskRoutes::with_limits(1, 1);
        routes.record("t1", "s", "a", None).unwrap();
        routes.record("t1", "s", "a", None).unwrap();
        assert_eq!(routes.len(), 1);
        assert_eq!(routes.server_of("t1", "a").as_deref(), Some("s"));
    }
}
