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
            DriverChoice::Unavailable(_) => NEEDS_A_MODEL.into(),
        }
    }

    /// What to set when there is no model (the agent is then neither a tool nor an A2A agent);
    /// `None` when there is one.
    pub fn missing(&self) -> Option<&str> {
        match self {
            DriverChoice::Unavailable(fix) => Some(fix),
            DriverChoice::Ready(_) | DriverChoice::Sampling => None,
        }
    }
}

/// The environment variables from which the `auto` provider finds a model, in the order it tries
/// them.
pub const MODEL_VARIABLES: [&str; 3] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"];

/// How an agent without a model is described in listings.
pub const NEEDS_A_MODEL: &str = "needs a model";

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
    let chosen = expanded_headers(agent, model, env).and_then(|headers| {
        if model.provider == "auto" {
            let resolved = resolve_auto(agent, model, env)?;
            choose_for(agent, &resolved, headers, env, client)
        } else {
            choose_for(agent, model, headers, env, client)
        }
    });
    chosen.unwrap_or_else(DriverChoice::Unavailable)
}

/// The driver of a named provider (not `auto`), sending `headers` if it speaks HTTP; `Err` says
/// what the user must fix.
fn choose_for(
    agent: &str,
    model: &ModelConfig,
    headers: Vec<(String, String)>,
    env: &dyn Fn(&str) -> Option<String>,
    client: &LazyClient,
) -> Result<DriverChoice, String> {
    match model.provider.as_str() {
        "scripted" => scripted(agent, model),
        "sampling" => Ok(DriverChoice::Sampling),
        "anthropic" => anthropic(model, headers, env, client),
        provider => openai_compatible(agent, provider, model, headers, env, client),
    }
}

/// `auto`: the first provider the environment has what it needs for, in the order the message
/// names them.
fn resolve_auto(
    agent: &str,
    model: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelConfig, String> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    let mut resolved = model.clone();
    if set("OPENAI_API_KEY").is_some() {
        resolved.provider = "openai".into();
    } else if set("ANTHROPIC_API_KEY").is_some() {
        resolved.provider = "anthropic".into();
    } else if let Some(base) = set("OPENAI_BASE_URL") {
        resolved.provider = "openai-compatible".into();
        resolved.base_url.get_or_insert(base);
        if resolved.api_key_env.is_none() && env("OPENAI_API_KEY").is_some() {
            resolved.api_key_env = Some("OPENAI_API_KEY".into());
        }
    } else {
        return Err(format!(
            "agent `{agent}` has no model: set OPENAI_API_KEY (OpenAI), ANTHROPIC_API_KEY \
             (Anthropic), or OPENAI_BASE_URL and PORTICO_MODEL for an OpenAI-compatible server \
             (e.g. `export OPENAI_BASE_URL=http://127.0.0.1:11434/v1 PORTICO_MODEL=llama3.2` for \
             Ollama) in Portico's environment, or give the agent a `model` in the config"
        ));
    }
    if resolved.model.is_none() {
        resolved.model = set("PORTICO_MODEL");
    }
    Ok(resolved)
}

fn scripted(agent: &str, model: &ModelConfig) -> Result<DriverChoice, String> {
    let driver = Scripted::from_json(&serde_json::Value::Array(model.rules.clone()))
        .map_err(|error| format!("agent `{agent}`: its scripted rules are invalid: {error}"))?;
    Ok(DriverChoice::Ready(Arc::new(driver)))
}

fn anthropic(
    model: &ModelConfig,
    extra_headers: Vec<(String, String)>,
    env: &dyn Fn(&str) -> Option<String>,
    client: &LazyClient,
) -> Result<DriverChoice, String> {
    let (api_key, api_key_env) = configured_key(model, Some("ANTHROPIC_API_KEY"), env);
    if api_key.is_none() {
        return Err(LlmError::MissingKey {
            provider: "anthropic".into(),
            env_var: api_key_env.unwrap_or_default(),
        }
        .to_string());
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
        extra_headers,
        retry: retry_policy(model),
    };
    Ok(deferred(client, move |c| {
        Arc::new(Anthropic::new(settings.clone(), c))
    }))
}

fn openai_compatible(
    agent: &str,
    provider: &str,
    model: &ModelConfig,
    extra_headers: Vec<(String, String)>,
    env: &dyn Fn(&str) -> Option<String>,
    client: &LazyClient,
) -> Result<DriverChoice, String> {
    let Some((default_base, default_key_env, default_model)) = openai_flavour(provider) else {
        return Err(format!(
            "agent `{agent}`: unknown model provider `{provider}`; use one of {}",
            portico_config::PROVIDERS.join(", ")
        ));
    };
    let base_url = model
        .base_url
        .clone()
        .or_else(|| (!default_base.is_empty()).then(|| default_base.to_string()))
        .ok_or_else(|| {
            format!(
                "agent `{agent}`: provider `{provider}` needs `base_url` (e.g. \
                 \"http://127.0.0.1:8000/v1\")"
            )
        })?;
    let model_name = model
        .model
        .clone()
        .or(default_model.map(str::to_string))
        .ok_or_else(|| {
            format!(
                "agent `{agent}`: provider `{provider}` needs `model` (the model's name as the \
                 server at {base_url} knows it)"
            )
        })?;
    let (api_key, api_key_env) = configured_key(model, default_key_env, env);
    // A keyless local server needs no key, unless the config names one.
    if api_key.is_none()
        && let Some(env_var) = api_key_env.clone()
    {
        return Err(LlmError::MissingKey {
            provider: provider.into(),
            env_var,
        }
        .to_string());
    }
    let settings = OpenAiSettings {
        base_url,
        api_key,
        api_key_env,
        model: model_name,
        provider_label: provider.into(),
        extra_headers,
        retry: retry_policy(model),
    };
    Ok(deferred(client, move |c| {
        Arc::new(OpenAiCompatible::new(settings.clone(), c))
    }))
}

fn retry_policy(model: &ModelConfig) -> RetryPolicy {
    RetryPolicy {
        max_retries: model
            .max_retries
            .unwrap_or(RetryPolicy::default().max_retries),
        ..RetryPolicy::default()
    }
}

/// The configured `headers`, with `${VAR}` expanded; every HTTP provider sends them.
fn expanded_headers(
    agent: &str,
    model: &ModelConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    model
        .headers
        .iter()
        .map(|(name, value)| {
            portico_config::expand_vars(value, env)
                .map(|value| (name.clone(), value))
                .map_err(|error| format!("agent `{agent}`: model header `{name}`: {error}"))
        })
        .collect()
}

/// The key (absent when unset or empty) and the variable it is read from: the configured
/// `api_key_env`, else the provider's default.
fn configured_key(
    model: &ModelConfig,
    default_env: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Option<String>, Option<String>) {
    let env_name = model
        .api_key_env
        .clone()
        .or(default_env.map(str::to_string));
    let value = env_name.as_deref().and_then(env).filter(|v| !v.is_empty());
    (value, env_name)
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

    /// Answers one request on 127.0.0.1 with a finished Anthropic stream and hands back the
    /// request's head, lower-cased.
    async fn one_anthropic_answer() -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buffer = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let read = socket.read(&mut buffer).await.unwrap();
                assert!(
                    read > 0,
                    "the driver hung up before sending its request head"
                );
                head.extend_from_slice(&buffer[..read]);
            }
            let events = [
                (
                    "message_start",
                    r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-test","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":0}"#,
                ),
                (
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}"#,
                ),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ];
            let body: String = events
                .iter()
                .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
                .collect();
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
            socket.shutdown().await.ok();
            String::from_utf8_lossy(&head).to_lowercase()
        });
        (origin, served)
    }

    #[tokio::test]
    async fn configured_headers_reach_the_anthropic_endpoint() {
        let (origin, served) = one_anthropic_answer().await;
        let client =
            LazyClient::ready(SafeClient::new(NetPolicy::allow_private_network()).unwrap());
        let mut settings = model("anthropic");
        settings.base_url = Some(origin);
        settings.model = Some("claude-test".into());
        settings
            .headers
            .insert("X-Gateway-Token".into(), "${GATEWAY_TOKEN}".into());
        let env = env_of(&[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("GATEWAY_TOKEN", "g-42"),
        ]);
        let DriverChoice::Ready(driver) = choose("a", &settings, &env, &client) else {
            panic!("expected a driver");
        };
        let request = portico_llm::ChatRequest {
            messages: vec![portico_llm::ChatMessage::User {
                text: "hello".into(),
                message_id: None,
            }],
            ..Default::default()
        };
        let events: portico_llm::EventSink = Arc::new(|_| {});
        let turn = driver.complete(&request, &events).await;
        let head = served.await.unwrap();
        assert!(head.contains("\r\nx-gateway-token: g-42\r\n"), "{head}");
        assert!(head.contains("\r\nx-api-key: sk-ant-test\r\n"), "{head}");
        assert!(turn.is_ok(), "{turn:?}");
    }
}
