//! From an agent's `model` settings to a model driver.

use std::sync::Arc;

use portico_config::ModelConfig;
use portico_core::relay::Caller;
use portico_llm::{
    Anthropic, AnthropicSettings, LlmError, ModelDriver, OpenAiCompatible, OpenAiSettings,
    RetryPolicy, Sampling, Scripted,
};
use std::sync::OnceLock;

use portico_net::{LazyClient, SafeClient};

/// How an agent reaches its model.
#[derive(Clone)]
pub enum DriverChoice {
    Ready(Arc<dyn ModelDriver>),
    /// Completions go to the MCP client that called the agent; chosen per call.
    Sampling,
    /// No model could be set up; calling the agent returns this message, which says what to set.
    Unavailable(String),
}

impl DriverChoice {
    /// The driver for one run. `caller` is the client at the far end, for the sampling driver.
    pub fn for_call(
        &self,
        agent: &str,
        caller: Option<&Arc<dyn Caller>>,
    ) -> Result<Arc<dyn ModelDriver>, String> {
        match self {
            DriverChoice::Ready(driver) => Ok(driver.clone()),
            DriverChoice::Unavailable(message) => Err(message.clone()),
            DriverChoice::Sampling => match caller {
                Some(caller) => Ok(Arc::new(Sampling::new(caller.clone()))),
                None => Err(format!(
                    "agent `{agent}` uses the `sampling` provider, which needs an MCP client that \
                     supports sampling; call it as the tool portico_agent_{} from such a client",
                    agent.replace('-', "_")
                )),
            },
        }
    }

    pub fn describe(&self) -> String {
        match self {
            DriverChoice::Ready(driver) => driver.describe(),
            DriverChoice::Sampling => "the calling MCP client's model (sampling)".into(),
            DriverChoice::Unavailable(_) => "no model configured".into(),
        }
    }
}

/// Defaults of the OpenAI-compatible providers: base URL, key variable (None: keyless local server),
/// default model.
fn openai_flavour(
    provider: &str,
) -> Option<(&'static str, Option<&'static str>, Option<&'static str>)> {
    Some(match provider {
        "openai" => (
            "https://api.openai.com/v1",
            Some("OPENAI_API_KEY"),
            Some("gpt-4o-mini"),
        ),
        "ollama" => ("http://127.0.0.1:11434/v1", None, None),
        "vllm" => ("http://127.0.0.1:8000/v1", None, None),
        "llamacpp" => ("http://127.0.0.1:8080/v1", None, Some("default")),
        "lmstudio" => ("http://127.0.0.1:1234/v1", None, None),
        "openrouter" => (
            "https://openrouter.ai/api/v1",
            Some("OPENROUTER_API_KEY"),
            None,
        ),
        "groq" => ("https://api.groq.com/openai/v1", Some("GROQ_API_KEY"), None),
        "openai-compatible" => ("", None, None),
        _ => return None,
    })
}

/// Builds the driver an agent's settings describe. `env` reads Portico's environment (injected so
/// tests need not touch the process environment). A problem the user must fix becomes
/// [`DriverChoice::Unavailable`] with the fix in its message, so the hub still starts and only that
/// agent fails.
pub fn choose(
    agent: &str,
    model: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
    client: &LazyClient,
) -> DriverChoice {
    let retry = RetryPolicy {
        max_retries: model
            .max_retries
            .unwrap_or(RetryPolicy::default().max_retries),
        ..RetryPolicy::default()
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    for (name, value) in &model.headers {
        match portico_config::expand_vars(value, env) {
            Ok(value) => headers.push((name.clone(), value)),
            Err(error) => {
                return DriverChoice::Unavailable(format!(
                    "agent `{agent}`: model header `{name}`: {error}"
                ));
            }
        }
    }
    let key = |default_env: Option<&str>| -> (Option<String>, Option<String>) {
        let env_name = model
            .api_key_env
            .clone()
            .or(default_env.map(str::to_string));
        let value = env_name.as_deref().and_then(env).filter(|v| !v.is_empty());
        (value, env_name)
    };
    match model.provider.as_str() {
        "auto" => {
            let mut resolved = model.clone();
            if env("OPENAI_API_KEY").is_some_and(|v| !v.is_empty()) {
                resolved.provider = "openai".into();
            } else if env("ANTHROPIC_API_KEY").is_some_and(|v| !v.is_empty()) {
                resolved.provider = "anthropic".into();
            } else if let Some(base) = env("OPENAI_BASE_URL").filter(|v| !v.is_empty()) {
                resolved.provider = "openai-compatible".into();
                resolved.base_url.get_or_insert(base);
                if resolved.model.is_none() {
                    resolved.model = env("PORTICO_MODEL").filter(|v| !v.is_empty());
                }
                if resolved.api_key_env.is_none() && env("OPENAI_API_KEY").is_some() {
                    resolved.api_key_env = Some("OPENAI_API_KEY".into());
                }
            } else {
                return DriverChoice::Unavailable(format!(
                    "agent `{agent}` has no model: set OPENAI_API_KEY (OpenAI), ANTHROPIC_API_KEY \
                     (Anthropic), or OPENAI_BASE_URL to an OpenAI-compatible server such as Ollama \
                     (http://127.0.0.1:11434/v1, with PORTICO_MODEL naming the model) in Portico's \
                     environment, or give the agent a `model` in the config, then restart Portico"
                ));
            }
            if resolved.model.is_none() {
                resolved.model = env("PORTICO_MODEL").filter(|v| !v.is_empty());
            }
            choose(agent, &resolved, env, client)
        }
        "anthropic" => {
            let (api_key, api_key_env) = key(Some("ANTHROPIC_API_KEY"));
            if api_key.is_none() {
                return DriverChoice::Unavailable(
                    LlmError::MissingKey {
                        provider: "anthropic".into(),
                        env_var: api_key_env.unwrap_or_default(),
                    }
                    .to_string(),
                );
            }
            let settings = AnthropicSettings {
                base_url: model
                    .base_url
                    .clone()
                    .unwrap_or_else(|| "https://api.anthropic.com".into()),
                api_key,
                api_key_env,
                model: model
                    .model
                    .clone()
                    .unwrap_or_else(|| "claude-sonnet-4-5".into()),
                retry,
            };
            deferred(client, move |c| {
                Arc::new(Anthropic::new(settings.clone(), c))
            })
        }
        "scripted" => match Scripted::from_json(&serde_json::Value::Array(model.rules.clone())) {
            Ok(driver) => DriverChoice::Ready(Arc::new(driver)),
            Err(error) => DriverChoice::Unavailable(format!(
                "agent `{agent}`: its scripted rules are invalid: {error}"
            )),
        },
        "sampling" => DriverChoice::Sampling,
        provider => {
            let Some((default_base, default_key_env, default_model)) = openai_flavour(provider)
            else {
                return DriverChoice::Unavailable(format!(
                    "agent `{agent}`: unknown model provider `{provider}`; use one of {}",
                    portico_config::PROVIDERS.join(", ")
                ));
            };
            let Some(base_url) = model
                .base_url
                .clone()
                .or_else(|| (!default_base.is_empty()).then(|| default_base.to_string()))
            else {
                return DriverChoice::Unavailable(format!(
                    "agent `{agent}`: provider `{provider}` needs `base_url` (e.g. \
                     \"http://127.0.0.1:8000/v1\")"
                ));
            };
            let Some(model_name) = model.model.clone().or(default_model.map(str::to_string)) else {
                return DriverChoice::Unavailable(format!(
                    "agent `{agent}`: provider `{provider}` needs `model` (the model's name as the \
                     server at {base_url} knows it)"
                ));
            };
            let (api_key, api_key_env) = key(default_key_env);
            // A keyless local server needs no key, unless the config names one.
            if api_key.is_none()
                && let Some(env_var) = api_key_env.clone()
            {
                return DriverChoice::Unavailable(
                    LlmError::MissingKey {
                        provider: provider.into(),
                        env_var,
                    }
                    .to_string(),
                );
            }
            let settings = OpenAiSettings {
                base_url,
                api_key,
                api_key_env,
                model: model_name,
                provider_label: provider.into(),
                extra_headers: headers,
                retry,
            };
            deferred(client, move |c| {
                Arc::new(OpenAiCompatible::new(settings.clone(), c))
            })
        }
    }
}

/// An HTTP driver made when first used, with the HTTP client it needs: building the client costs
/// milliseconds that start-up should not pay for agents nobody calls.
fn deferred(
    client: &LazyClient,
    build: impl Fn(SafeClient) -> Arc<dyn ModelDriver> + Send + Sync + 'static,
) -> DriverChoice {
    DriverChoice::Ready(Arc::new(Deferred {
        client: client.clone(),
        build: Box::new(build),
        built: OnceLock::new(),
    }))
}

type Build = Box<dyn Fn(SafeClient) -> Arc<dyn ModelDriver> + Send + Sync>;

struct Deferred {
    client: LazyClient,
    build: Build,
    built: OnceLock<Result<Arc<dyn ModelDriver>, String>>,
}

impl Deferred {
    fn driver(&self) -> Result<Arc<dyn ModelDriver>, String> {
        self.built
            .get_or_init(|| self.client.get().map(|client| (self.build)(client)))
            .clone()
    }
}

impl ModelDriver for Deferred {
    fn describe(&self) -> String {
        match self.driver() {
            Ok(driver) => driver.describe(),
            Err(error) => format!("a model that cannot be reached: {error}"),
        }
    }

    fn complete<'a>(
        &'a self,
        request: &'a portico_llm::ChatRequest,
        events: &'a portico_llm::EventSink,
    ) -> portico_core::relay::BoxFuture<'a, Result<portico_llm::ModelTurn, LlmError>> {
        Box::pin(async move {
            let driver = self
                .driver()
                .map_err(|detail| LlmError::NotAvailable { detail })?;
            driver.complete(request, events).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_net::NetPolicy;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn model(provider: &str) -> ModelConfig {
        ModelConfig {
            provider: provider.into(),
            ..ModelConfig::default()
        }
    }

    #[test]
    fn auto_without_anything_says_what_to_set() {
        let client = LazyClient::ready(SafeClient::new(NetPolicy::public_only()).unwrap());
        let DriverChoice::Unavailable(message) =
            choose("assistant", &model("auto"), &env_of(&[]), &client)
        else {
            panic!("expected unavailable");
        };
        assert!(message.contains("OPENAI_API_KEY"), "{message}");
        assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
        assert!(message.contains("OPENAI_BASE_URL"), "{message}");
    }

    #[test]
    fn auto_picks_from_the_environment_in_order() {
        let client = LazyClient::ready(SafeClient::new(NetPolicy::public_only()).unwrap());
        let pick = |vars: &'static [(&'static str, &'static str)]| {
            choose("a", &model("auto"), &env_of(vars), &client).describe()
        };
        assert!(
            pick(&[("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", "k")])
                .starts_with("openai gpt-4o-mini")
        );
        assert!(pick(&[("ANTHROPIC_API_KEY", "k")]).starts_with("anthropic"));
        let local = pick(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
            ("PORTICO_MODEL", "llama3.2"),
        ]);
        assert!(
            local.contains("llama3.2") && local.contains("127.0.0.1:11434"),
            "{local}"
        );
    }

    #[test]
    fn missing_key_names_the_variable() {
        let client = LazyClient::ready(SafeClient::new(NetPolicy::public_only()).unwrap());
        let mut settings = model("openai");
        settings.api_key_env = Some("MY_OPENAI_KEY".into());
        let DriverChoice::Unavailable(message) = choose("a", &settings, &env_of(&[]), &client)
        else {
            panic!("expected unavailable");
        };
        assert!(message.contains("MY_OPENAI_KEY"), "{message}");
        let DriverChoice::Unavailable(message) =
            choose("a", &model("anthropic"), &env_of(&[]), &client)
        else {
            panic!("expected unavailable");
        };
        assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
        // Keyless local servers need no key, but need a model name.
        let DriverChoice::Unavailable(message) =
            choose("a", &model("ollama"), &env_of(&[]), &client)
        else {
            panic!("expected unavailable");
        };
        assert!(message.contains("needs `model`"), "{message}");
    }
}
