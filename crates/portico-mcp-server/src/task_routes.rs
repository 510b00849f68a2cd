//! Which upstream runs a task a client created through this door (the MCP tasks extension), so its
//! `tasks/get`, `tasks/update` and `tasks/cancel` reach that upstream, from that client only.
//!
//! Shared by every session: a 2026-07-28 client polls from new connections. Bounded in all and per
//! client. A route goes when its ttl runs out; once its task is seen final it stays readable (the
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
    owner: String,
    expires: Instant,
    /// Its task was seen completed, failed or cancelled.
    settled: bool,
}

/// The routes of the tasks relayed through this door.
#[derive(Clone)]
pub struct TaskRoutes {
    routes: Arc<Mutex<HashMap<String, Route>>>,
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
}

impl TaskRoutes {
    pub fn with_limits(max: usize, max_per_client: usize) -> Self {
        TaskRoutes {
            routes: Arc::default(),
            max,
            max_per_client,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Route>> {
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
        let mut routes = self.lock();
        routes.retain(|_, route| route.expires > now);
        let owned = routes
            .values()
            .filter(|route| route.owner == owner && !route.settled)
            .count();
        if owned >= self.max_per_client {
            return Err(TaskRouteError::ClientFull {
                owner: owner.to_string(),
                max: self.max_per_client,
            });
        }
        if routes.len() >= self.max {
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
            task_id.to_string(),
            Route {
                server: server.to_string(),
                owner: owner.to_string(),
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
            .get(task_id)
            .filter(|route| route.owner == owner && route.expires > now)
            .map(|route| route.server.clone())
    }

    /// Forgets `task_id` (its creation could not be relayed).
    pub fn forget(&self, task_id: &str) {
        self.lock().remove(task_id);
    }

    /// Marks `task_id` settled: its task was seen completed, failed or cancelled.
    pub fn settle(&self, task_id: &str) {
        if let Some(route) = self.lock().get_mut(task_id) {
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
        routes.forget("t1");
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
        routes.settle("a1");
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
        routes.settle("t1");
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
}
