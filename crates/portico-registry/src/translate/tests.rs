use serde_json::json;

use super::*;

fn server(value: serde_json::Value) -> ServerJson {
    serde_json::from_value(value).unwrap()
}

fn with_values(values: &[(&str, &str)]) -> Options {
    Options {
        values: values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Options::default()
    }
}

fn stdio(t: &Translation) -> (&str, Vec<&str>) {
    match &t.server.transport {
        ImportedTransport::Stdio { command, args, .. } => {
            (command.as_str(), args.iter().map(String::as_str).collect())
        }
        other => panic!("not stdio: {other:?}"),
    }
}

fn env(t: &Translation) -> Vec<(&str, &str)> {
    t.server
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

fn weather() -> ServerJson {
    server(json!({
        "name": "io.github.example/weather-mcp",
        "description": "Weather",
        "version": "2.1.0",
        "packages": [{
            "registryType": "npm",
            "identifier": "@example/weather-mcp",
            "version": "2.1.0",
            "runtimeHint": "npx",
            "transport": {"type": "stdio"},
            "packageArguments": [
                {"type": "positional", "value": "serve"},
                {"type": "named", "name": "--units", "valueHint": "units", "default": "metric",
                 "choices": ["metric", "imperial"]},
                {"type": "named", "name": "--region", "valueHint": "region", "isRequired": true}
            ],
            "environmentVariables": [
                {"name": "WEATHER_API_KEY", "isSecret": true, "isRequired": true,
                 "description": "API key from weather.example"},
                {"name": "WEATHER_LOG", "default": "info"},
                {"name": "WEATHER_OPTIONAL"},
                {"name": "WEATHER_MODE", "value": "fast"}
            ]
        }]
    }))
}

#[test]
fn npm_runs_with_npx_pinned_and_secrets_only_as_references() {
    let t = translate(
        &weather(),
        &with_values(&[("WEATHER_API_KEY", "sk-the-secret"), ("region", "eu")]),
    )
    .unwrap();
    assert_eq!(t.server.name, "weather-mcp");
    assert_eq!(t.runs_as, RunsAs::Npm);
    assert_eq!(t.version, "2.1.0");
    assert_eq!(
        stdio(&t),
        (
            "npx",
            vec![
                "-y",
                "@example/weather-mcp@2.1.0",
                "serve",
                "--units",
                "metric",
                "--region",
                "eu"
            ]
        )
    );
    assert_eq!(
        env(&t),
        vec![
            ("WEATHER_API_KEY", "${WEATHER_API_KEY}"),
            ("WEATHER_LOG", "info"),
            ("WEATHER_MODE", "fast"),
        ]
    );
    assert_eq!(
        t.secrets,
        vec![SecretValue {
            variable: "WEATHER_API_KEY".into(),
            value: "sk-the-secret".into()
        }]
    );
    // The value is nowhere in the entry, nor in what Debug shows.
    assert!(!format!("{:?}", t.server).contains("sk-the-secret"));
    assert!(!format!("{:?}", t.secrets).contains("sk-the-secret"));
    assert_eq!(t.missing().count(), 0);
    assert!(t.writable());

    let import = t.into_import();
    assert_eq!(import.exports.len(), 1);
    assert_eq!(import.exports[0].variable, "WEATHER_API_KEY");
    let merged = import
        .merge(
            "config.toml",
            Some(""),
            portico_config::import::OnClash::Refuse,
        )
        .unwrap();
    assert!(merged.text.contains(
        "env = { WEATHER_API_KEY = \"${WEATHER_API_KEY}\", WEATHER_LOG = \"info\", WEATHER_MODE = \"fast\" }"
    ), "{}", merged.text);
    assert!(!merged.text.contains("sk-the-secret"));
}

#[test]
fn what_is_missing_is_listed_with_what_the_user_needs_to_know() {
    let t = translate(&weather(), &Options::default()).unwrap();
    let missing: Vec<(&str, InputPlace, bool, Option<&str>, bool)> = t
        .missing()
        .map(|i| {
            (
                i.name.as_str(),
                i.place,
                i.secret,
                i.variable.as_deref(),
                i.can_wait(),
            )
        })
        .collect();
    assert_eq!(
        missing,
        vec![
            (
                "WEATHER_API_KEY",
                InputPlace::Env,
                true,
                Some("WEATHER_API_KEY"),
                true
            ),
            ("region", InputPlace::Argument, false, None, false),
        ]
    );
    let key = t
        .inputs
        .iter()
        .find(|i| i.name == "WEATHER_API_KEY")
        .unwrap();
    assert_eq!(
        key.description.as_deref(),
        Some("API key from weather.example")
    );
    let units = t.inputs.iter().find(|i| i.name == "units").unwrap();
    assert_eq!(
        (
            units.default.as_deref(),
            units.choices.clone(),
            units.missing()
        ),
        (
            Some("metric"),
            vec!["metric".to_string(), "imperial".to_string()],
            false
        )
    );
    // A required argument cannot wait for a variable: the entry is not written without it.
    assert!(!t.writable());
    assert_eq!(
        stdio(&t).1,
        vec![
            "-y",
            "@example/weather-mcp@2.1.0",
            "serve",
            "--units",
            "metric"
        ]
    );
}

#[test]
fn a_value_outside_the_choices_is_refused() {
    let error = translate(
        &weather(),
        &with_values(&[("units", "kelvin"), ("region", "eu")]),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "io.github.example/weather-mcp: the argument `--units` was refused: the value given is not one of its choices: metric, imperial"
    );
}

#[test]
fn pypi_runs_with_uvx_at_the_exact_version() {
    let t = translate(
        &server(json!({
            "name": "io.github.example/time",
            "description": "Time",
            "version": "0.6.2",
            "packages": [{
                "registryType": "pypi", "identifier": "mcp-server-time", "version": "0.6.2",
                "transport": {"type": "stdio"},
                "runtimeArguments": [{"type": "named", "name": "--python", "value": "3.12"}],
                "packageArguments": [{"type": "named", "name": "--local-timezone", "valueHint": "tz", "default": "UTC"}]
            }]
        })),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(
        stdio(&t),
        (
            "uvx",
            vec![
                "--python",
                "3.12",
                "mcp-server-time@0.6.2",
                "--local-timezone",
                "UTC"
            ]
        )
    );
}

#[test]
fn oci_runs_docker_with_env_passed_by_name() {
    let document = server(json!({
        "name": "io.github.example/db",
        "description": "Database",
        "version": "1.4.0",
        "packages": [{
            "registryType": "oci", "identifier": "ghcr.io/example/db-mcp:1.4.0",
            "transport": {"type": "stdio"},
            "runtimeArguments": [{"type": "named", "name": "-v", "value": "{dir}:/data",
                "variables": {"dir": {"isRequired": true, "description": "data directory", "format": "filepath"}}}],
            "environmentVariables": [
                {"name": "DB_PASSWORD", "isSecret": true, "isRequired": true},
                {"name": "DB_HOST", "default": "localhost"}
            ]
        }]
    }));
    let t = translate(
        &document,
        &with_values(&[("dir", "/srv/db data"), ("DB_PASSWORD", "hunter2")]),
    )
    .unwrap();
    assert_eq!(t.version, "1.4.0");
    assert_eq!(
        stdio(&t),
        (
            "docker",
            vec![
                "run",
                "-i",
                "--rm",
                "-e",
                "DB_PASSWORD",
                "-e",
                "DB_HOST",
                "-v",
                "/srv/db data:/data",
                "ghcr.io/example/db-mcp:1.4.0"
            ]
        )
    );
    assert_eq!(
        env(&t),
        vec![("DB_PASSWORD", "${DB_PASSWORD}"), ("DB_HOST", "localhost")]
    );
    // Nothing on the command line holds the secret.
    assert!(!stdio(&t).1.iter().any(|a| a.contains("hunter2")));

    // The older form: the version beside an untagged image.
    let older = server(json!({
        "name": "io.github.example/db", "description": "d", "version": "1.0.0",
        "packages": [{"registryType": "oci", "identifier": "example/db", "version": "1.0.0",
                      "transport": {"type": "stdio"}}]
    }));
    let t = translate(&older, &Options::default()).unwrap();
    assert_eq!(stdio(&t).1.last(), Some(&"example/db:1.0.0"));

    for (identifier, reason) in [
        (
            "example/db",
            "it has no tag or digest, so its version is not pinned",
        ),
        (
            "example/db:latest",
            "its tag is `latest`, which is not a pinned version",
        ),
        (
            "--privileged",
            "not an image reference ([registry/]namespace/image[:tag][@digest])",
        ),
    ] {
        let doc = server(json!({
            "name": "io.github.example/db", "description": "d", "version": "1.0.0",
            "packages": [{"registryType": "oci", "identifier": identifier, "transport": {"type": "stdio"}}]
        }));
        assert_eq!(
            translate(&doc, &Options::default())
                .unwrap_err()
                .to_string(),
            format!("io.github.example/db: the image `{identifier}` was refused: {reason}")
        );
    }
}

#[test]
fn docker_flags_that_hand_over_the_host_are_refused() {
    for (flag, value) in [
        ("--privileged", None),
        ("--network", Some("host")),
        ("--network=host", None),
        ("-v", Some("/var/run/docker.sock:/var/run/docker.sock")),
        ("-v", Some("/:/host")),
        ("--cap-add", Some("SYS_ADMIN")),
    ] {
        let mut argument = json!({"type": "named", "name": flag});
        if let Some(value) = value {
            argument["value"] = json!(value);
        } else {
            argument["value"] = json!("");
        }
        let doc = server(json!({
            "name": "io.github.example/db", "description": "d", "version": "1.0.0",
            "packages": [{"registryType": "oci", "identifier": "example/db:1.0.0",
                          "transport": {"type": "stdio"}, "runtimeArguments": [argument]}]
        }));
        let error = translate(&doc, &Options::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("would give the container the host's"),
            "{flag} {value:?}: {error}"
        );
    }
}

#[test]
fn a_remote_gets_its_headers_with_secrets_as_references() {
    let document = server(json!({
        "name": "com.example/search",
        "description": "Search",
        "version": "3.0.0",
        "remotes": [
            {"type": "sse", "url": "https://mcp.example.com/sse"},
            {"type": "streamable-http", "url": "https://{tenant}.mcp.example.com/mcp",
             "variables": {"tenant": {"isRequired": true, "description": "your tenant"}},
             "headers": [
                {"name": "Authorization", "value": "Bearer {api_key}",
                 "variables": {"api_key": {"isSecret": true, "isRequired": true}}},
                {"name": "X-Region", "default": "eu"},
                {"name": "X-Api-Key", "isSecret": true, "isRequired": true}
             ]}
        ]
    }));
    let t = translate(
        &document,
        &with_values(&[("tenant", "acme"), ("api_key", "tok-123")]),
    )
    .unwrap();
    assert_eq!(t.runs_as, RunsAs::Remote);
    let ImportedTransport::Remote {
        kind, url, headers, ..
    } = &t.server.transport
    else {
        panic!("not remote");
    };
    assert_eq!(
        (*kind, url.as_str()),
        ("http", "https://acme.mcp.example.com/mcp")
    );
    assert_eq!(
        headers,
        &vec![
            (
                "Authorization".to_string(),
                "Bearer ${SEARCH_API_KEY}".to_string()
            ),
            ("X-Region".to_string(), "eu".to_string()),
            ("X-Api-Key".to_string(), "${SEARCH_X_API_KEY}".to_string()),
        ]
    );
    assert_eq!(
        t.secrets,
        vec![SecretValue {
            variable: "SEARCH_API_KEY".into(),
            value: "tok-123".into()
        }]
    );
    let missing: Vec<&str> = t.missing().map(|i| i.name.as_str()).collect();
    assert_eq!(missing, vec!["X-Api-Key"]);
    assert!(t.writable());

    // Without the tenant the URL cannot be written.
    let t = translate(&document, &Options::default()).unwrap();
    assert!(!t.writable());
    assert!(
        t.missing()
            .any(|i| i.name == "tenant" && i.place == InputPlace::UrlVariable)
    );
}

#[test]
fn the_order_of_preference_and_an_explicit_choice() {
    let document = server(json!({
        "name": "io.github.example/both", "description": "b", "version": "1.0.0",
        "packages": [
            {"registryType": "oci", "identifier": "example/both:1.0.0", "transport": {"type": "stdio"}},
            {"registryType": "npm", "identifier": "both-mcp", "version": "1.0.0", "transport": {"type": "stdio"}}
        ],
        "remotes": [{"type": "streamable-http", "url": "https://both.example.com/mcp"}]
    }));
    assert_eq!(
        runnable(&document),
        vec![RunsAs::Npm, RunsAs::Oci, RunsAs::Remote]
    );
    assert_eq!(
        translate(&document, &Options::default()).unwrap().runs_as,
        RunsAs::Npm
    );
    let remote = Options {
        prefer: Some(RunsAs::Remote),
        ..Options::default()
    };
    assert_eq!(
        translate(&document, &remote).unwrap().runs_as,
        RunsAs::Remote
    );
    let pypi = Options {
        prefer: Some(RunsAs::Pypi),
        ..Options::default()
    };
    assert_eq!(
        translate(&document, &pypi).unwrap_err().to_string(),
        "io.github.example/both 1.0.0 offers no PyPI package; it offers an oci package `example/both:1.0.0`, an npm package `both-mcp` 1.0.0 and a remote (streamable-http)"
    );
}

#[test]
fn nothing_runnable_says_what_there_is() {
    let document = server(json!({
        "name": "io.github.example/dotnet", "description": "d", "version": "1.0.0",
        "packages": [
            {"registryType": "nuget", "identifier": "Example.Mcp", "version": "1.0.0", "transport": {"type": "stdio"}},
            {"registryType": "mcpb", "identifier": "https://github.com/example/releases/download/v1/x.mcpb",
             "fileSha256": "fe333e598595000ae021bd27117db32ec69af6987f507ba7a63c90638ff633ce",
             "transport": {"type": "stdio"}},
            {"registryType": "npm", "identifier": "http-only", "version": "1.0.0",
             "transport": {"type": "streamable-http", "url": "http://localhost:{port}/mcp"}}
        ]
    }));
    assert_eq!(runnable(&document), vec![]);
    assert_eq!(
        translate(&document, &Options::default())
            .unwrap_err()
            .to_string(),
        "io.github.example/dotnet 1.0.0 has nothing Portico can run: it offers a nuget package `Example.Mcp` 1.0.0, an mcpb package `https://github.com/example/releases/download/v1/x.mcpb` and an npm package `http-only` 1.0.0 serving streamable-http; Portico runs npm, PyPI and OCI packages over stdio, and remote servers (streamable-http, sse)"
    );
    let empty =
        server(json!({"name": "io.github.example/none", "description": "n", "version": "1"}));
    assert!(
        translate(&empty, &Options::default())
            .unwrap_err()
            .to_string()
            .contains("it offers no package and no remote")
    );
}

#[test]
fn names_are_sanitized_and_can_be_overridden() {
    assert_eq!(
        portico_name("io.github.modelcontextprotocol/server-everything"),
        "server-everything"
    );
    assert_eq!(portico_name("com.example/My..Server_v2"), "my-server_v2");
    assert_eq!(portico_name("com.example/..."), "server");
    assert_eq!(portico_name(&format!("a/{}", "x".repeat(300))).len(), 48);
    let named = Options {
        name: Some("weather".into()),
        values: with_values(&[("region", "eu")]).values,
        ..Options::default()
    };
    assert_eq!(
        translate(&weather(), &named).unwrap().server.name,
        "weather"
    );
    let bad = Options {
        name: Some("../etc".into()),
        ..Options::default()
    };
    assert_eq!(
        translate(&weather(), &bad).unwrap_err().to_string(),
        "io.github.example/weather-mcp: the Portico name `../etc` is not usable: a server name has only letters, digits, `-` and `_`"
    );
}

/// A hostile registry (or a typo'd `--env`) gets no shell, no new TOML line and no new header: each
/// value is one argv element or refused.
#[test]
fn hostile_documents_and_values_are_refused_or_carried_as_plain_argv() {
    // Shell metacharacters are carried as they are, one argv element each: nothing runs a shell.
    let t = translate(
        &weather(),
        &with_values(&[("region", "eu; rm -rf ~ && $(curl evil) `x` | y > z")]),
    )
    .unwrap();
    assert_eq!(
        stdio(&t).1.last(),
        Some(&"eu; rm -rf ~ && $(curl evil) `x` | y > z")
    );

    let base = |package: serde_json::Value| {
        server(
            json!({"name": "io.github.example/evil", "description": "e", "version": "1.0.0",
                      "packages": [package]}),
        )
    };
    let refused = |document: &ServerJson, options: &Options| {
        translate(document, options).unwrap_err().to_string()
    };
    // A newline in a value would start a new TOML line or header.
    assert!(
        refused(&weather(), &with_values(&[("region", "eu\n[[mcp_servers]]")]))
            .ends_with("the argument `--region` was refused: it holds a control character (a newline, a tab, ...)")
    );
    assert!(
        refused(
            &weather(),
            &with_values(&[("region", &"x".repeat(MAX_VALUE_CHARS + 1))])
        )
        .ends_with("was refused: it is longer than 4096 characters")
    );
    for (identifier, version) in [
        ("--registry=http://evil", "1.0.0"),
        ("../../etc/passwd", "1.0.0"),
        ("evil pkg", "1.0.0"),
        ("@scope/../x", "1.0.0"),
        ("evil", "^1.0.0"),
        ("evil", "latest"),
        ("evil", "1.x"),
        ("evil", "-v"),
        ("evil", "1.0.0 --foo"),
    ] {
        let document = base(json!({"registryType": "npm", "identifier": identifier,
                                   "version": version, "transport": {"type": "stdio"}}));
        let error = refused(&document, &Options::default());
        assert!(
            error.contains("was refused"),
            "{identifier} {version}: {error}"
        );
    }
    let pypi = base(
        json!({"registryType": "pypi", "identifier": "x; rm", "version": "1",
                            "transport": {"type": "stdio"}}),
    );
    assert!(refused(&pypi, &Options::default()).contains("not a PyPI package name"));
    let env_name = base(
        json!({"registryType": "npm", "identifier": "ok", "version": "1.0.0",
                                "transport": {"type": "stdio"},
                                "environmentVariables": [{"name": "A=B\nC", "value": "x"}]}),
    );
    assert!(
        refused(&env_name, &Options::default())
            .contains("the environment variable `A=B C` was refused")
    );
    let flag = base(
        json!({"registryType": "npm", "identifier": "ok", "version": "1.0.0",
                            "transport": {"type": "stdio"},
                            "packageArguments": [{"type": "named", "name": "not-a-flag", "value": "x"}]}),
    );
    assert!(refused(&flag, &Options::default()).contains("a flag starts with `-`"));
    let fixed_newline = base(
        json!({"registryType": "npm", "identifier": "ok", "version": "1.0.0",
                            "transport": {"type": "stdio"},
                            "packageArguments": [{"type": "positional", "value": "a\nb"}]}),
    );
    assert!(refused(&fixed_newline, &Options::default()).contains("control character"));
    let header = server(
        json!({"name": "io.github.example/evil", "description": "e", "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": "https://e.example.com/mcp",
                     "headers": [{"name": "X-A\r\nX-B", "value": "1"}]}]}),
    );
    assert!(refused(&header, &Options::default()).contains("a header's name is a token"));
    let url = server(
        json!({"name": "io.github.example/evil", "description": "e", "version": "1.0.0",
        "remotes": [{"type": "sse", "url": "file:///etc/passwd"}]}),
    );
    assert!(refused(&url, &Options::default()).contains("it is not an http(s) URL"));
    let name = server(json!({"name": "../../evil", "description": "e", "version": "1.0.0"}));
    assert!(refused(&name, &Options::default()).contains("the registry name was refused"));
    let huge_name = server(
        json!({"name": format!("a/{}", "b".repeat(300)), "description": "e", "version": "1"}),
    );
    assert!(refused(&huge_name, &Options::default()).contains("3 to 200 characters"));
}

#[test]
fn secrets_never_go_on_a_command_line() {
    let document = server(json!({
        "name": "io.github.example/cli", "description": "c", "version": "1.0.0",
        "packages": [{"registryType": "npm", "identifier": "cli-mcp", "version": "1.0.0",
                      "transport": {"type": "stdio"},
                      "packageArguments": [{"type": "named", "name": "--token", "valueHint": "token",
                                            "isSecret": true, "isRequired": true}]}]
    }));
    for options in [Options::default(), with_values(&[("token", "abc")])] {
        assert_eq!(
            translate(&document, &options).unwrap_err().to_string(),
            "io.github.example/cli: the argument `--token` is a secret passed on the command line, where every user of this machine can read it in the process list; Portico writes secrets only into env values and headers, so this server cannot be added as published"
        );
    }
}

#[test]
fn values_nothing_takes_are_noted() {
    let t = translate(
        &weather(),
        &with_values(&[("region", "eu"), ("WEATHER_APIKEY", "typo")]),
    )
    .unwrap();
    assert_eq!(
        t.notes,
        vec!["not used, as the server takes no such value: WEATHER_APIKEY"]
    );
}

#[test]
fn answers_are_added_without_a_second_fetch_and_status_notes_stay() {
    let options = Options {
        name: Some("wx".into()),
        status_note: Some("the registry marks this version deprecated: use 3.x".into()),
        ..Options::default()
    };
    let first = translate(&weather(), &options).unwrap();
    assert!(!first.writable());
    let second = first
        .with_values([("region".to_string(), "eu".to_string())])
        .unwrap();
    assert!(second.writable());
    assert_eq!(second.server.name, "wx");
    assert_eq!(stdio(&second).1.last(), Some(&"eu"));
    assert_eq!(
        second.notes,
        vec!["the registry marks this version deprecated: use 3.x"]
    );
}
