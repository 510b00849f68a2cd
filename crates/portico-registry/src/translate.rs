//! A `server.json` as a Portico `[[mcp_servers]]` entry, and the values the user must supply.
//!
//! What can be run: an npm package (`npx -y NAME@VERSION`), a PyPI package (`uvx NAME@VERSION`,
//! uv's exact-version form), an OCI image (`docker run -i --rm -e VAR ... IMAGE:TAG`), each over
//! stdio, and a remote (`streamable-http` as `http`, `sse`). The version is always pinned. NuGet and
//! MCPB packages, and packages that serve HTTP themselves, are not run; a document with nothing else
//! is an error that says what it has.
//!
//! Nothing here goes through a shell: every value becomes one argv element, one env value or one
//! header value. Values are still checked, because they land in a config file and a process table:
//! control characters (a newline would forge a TOML line or a header), oversized strings, package
//! names and versions outside their registries' alphabets, docker flags that give a container the
//! host, and secrets on a command line are refused.
//!
//! Secrets (`isSecret`) are never written: the entry refers to `${VAR}`, which Portico expands from
//! its environment (and its secret store) in env values and headers, and a value the user gave for
//! one is handed back in [`Translation::secrets`] for the caller to store.
//!
//! Pure: no I/O, so every rule is unit tested.

use std::collections::BTreeMap;

use portico_config::import::{Export, Import, ImportedServer, ImportedTransport, env_var_name};

use crate::server_json::{
    Argument, Input, KeyValueInput, Package, RegistryType, ServerJson, Transport, TransportKind,
};

/// The longest value taken into an entry (an argument, an env or header value, a URL).
pub const MAX_VALUE_CHARS: usize = 4096;
/// The longest registry name the schema allows.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest Portico name chosen from a registry name.
const MAX_PORTICO_NAME: usize = 48;

/// What an entry runs: a package kind, or a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunsAs {
    Npm,
    Pypi,
    Oci,
    Remote,
}

impl RunsAs {
    pub const ALL: [RunsAs; 4] = [RunsAs::Npm, RunsAs::Pypi, RunsAs::Oci, RunsAs::Remote];

    pub fn label(self) -> &'static str {
        match self {
            RunsAs::Npm => "npm",
            RunsAs::Pypi => "pypi",
            RunsAs::Oci => "oci",
            RunsAs::Remote => "remote",
        }
    }

    /// `npm`, `pypi`, `oci` or `remote`.
    pub fn parse(label: &str) -> Option<RunsAs> {
        RunsAs::ALL
            .into_iter()
            .find(|kind| kind.label().eq_ignore_ascii_case(label))
    }
}

/// What the caller decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// The entry's name; default: the registry name's last segment, sanitized.
    pub name: Option<String>,
    /// Run it this way when the server offers several (default: npm, PyPI, OCI, then a remote).
    pub prefer: Option<RunsAs>,
    /// Values the user gave (`--env NAME=value`), by input name: an environment variable, a
    /// header, an argument's label or a URL variable.
    pub values: BTreeMap<String, String>,
    /// Where the document came from, written above the entry (`# Imported from ...`).
    pub origin: String,
    /// What the registry says of this version when it is not active (deprecated, deleted), the
    /// first of the notes.
    pub status_note: Option<String>,
}

/// Where an input goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputPlace {
    Env,
    Header,
    Argument,
    UrlVariable,
}

impl InputPlace {
    pub fn label(self) -> &'static str {
        match self {
            InputPlace::Env => "environment variable",
            InputPlace::Header => "header",
            InputPlace::Argument => "argument",
            InputPlace::UrlVariable => "URL variable",
        }
    }
}

/// One value the server takes from the user.
#[derive(Debug, Clone, PartialEq)]
pub struct InputNeed {
    /// What `--env NAME=value` calls it.
    pub name: String,
    pub place: InputPlace,
    pub description: Option<String>,
    pub secret: bool,
    pub required: bool,
    pub default: Option<String>,
    pub choices: Vec<String>,
    /// `string`, `number`, `boolean` or `filepath`.
    pub format: Option<String>,
    /// The `${VAR}` the entry refers to for it (secrets, and env or header values not given).
    pub variable: Option<String>,
    /// The user gave a value.
    pub provided: bool,
}

impl InputNeed {
    /// Required, and neither given nor defaulted.
    pub fn missing(&self) -> bool {
        self.required && !self.provided && (self.default.is_none() || self.secret)
    }

    /// The entry refers to it as `${VAR}`, so the config can be written before it is set.
    pub fn can_wait(&self) -> bool {
        self.variable.is_some()
    }
}

/// A secret value the user gave: for the secret store, never for the file.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    pub variable: String,
    pub value: String,
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretValue")
            .field("variable", &self.variable)
            .finish_non_exhaustive()
    }
}

/// A server.json as an entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    /// The entry, as `portico import` writes entries ([`Import::merge`]).
    pub server: ImportedServer,
    pub registry_name: String,
    pub version: String,
    pub runs_as: RunsAs,
    /// Every value the server takes from the user, given or not.
    pub inputs: Vec<InputNeed>,
    /// Secret values the user gave; the entry refers to each as `${variable}`.
    pub secrets: Vec<SecretValue>,
    /// What the user should know (a deprecated server, a runtime hint not followed, ...).
    pub notes: Vec<String>,
    /// The document it was made from, and how: [`Translation::with_values`] translates it again.
    pub document: ServerJson,
    pub options: Options,
}

impl Translation {
    /// The inputs still to be supplied before the server can start.
    pub fn missing(&self) -> impl Iterator<Item = &InputNeed> {
        self.inputs.iter().filter(|input| input.missing())
    }

    /// The same server with more values (the answers to [`Translation::missing`]), without
    /// fetching it again.
    pub fn with_values(
        &self,
        values: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Translation, TranslateError> {
        let mut options = self.options.clone();
        options.values.extend(values);
        translate(&self.document, &options)
    }

    /// Whether the entry can be written now: nothing is missing but what it refers to as `${VAR}`.
    pub fn writable(&self) -> bool {
        self.missing().all(InputNeed::can_wait)
    }

    /// As an [`Import`] of one server, whose `exports` are the variables the entry refers to, for
    /// [`Import::merge`].
    pub fn into_import(self) -> Import {
        let mut exports: Vec<Export> = Vec::new();
        for input in &self.inputs {
            if let Some(variable) = &input.variable
                && !exports.iter().any(|e| &e.variable == variable)
            {
                let what = if input.secret { "secret " } else { "" };
                exports.push(Export {
                    variable: variable.clone(),
                    reason: format!(
                        "server `{}`: {what}{} {} ({} {})",
                        self.server.name,
                        input.place.label(),
                        input.name,
                        self.registry_name,
                        self.version
                    ),
                    // Values the user gave for secrets go to the store by `portico add` itself.
                    literal: None,
                });
            }
        }
        Import {
            servers: vec![self.server],
            exports,
            warnings: self.notes,
        }
    }
}

/// Why a server.json cannot become an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    #[error(
        "{name} {version} has nothing Portico can run: it offers {offers}; Portico runs npm, PyPI and OCI packages over stdio, and remote servers (streamable-http, sse)"
    )]
    NothingToRun {
        name: String,
        version: String,
        offers: String,
    },
    #[error("{name} {version} offers no {wanted}; it offers {offers}")]
    NotOffered {
        name: String,
        version: String,
        wanted: &'static str,
        offers: String,
    },
    #[error("{name}: {what} was refused: {reason}")]
    Refused {
        name: String,
        what: String,
        reason: String,
    },
    #[error(
        "{name}: {what} is a secret passed on the command line, where every user of this machine can read it in the process list; Portico writes secrets only into env values and headers, so this server cannot be added as published"
    )]
    SecretOnCommandLine { name: String, what: String },
    #[error("{name}: the Portico name `{chosen}` is not usable: {reason}")]
    BadName {
        name: String,
        chosen: String,
        reason: &'static str,
    },
}

/// The Portico name a registry name gets: its last segment, lower case, with `-` for anything but
/// letters, digits, `-` and `_` (so `..`, slashes and spaces never reach a tool name or a path).
pub fn portico_name(registry_name: &str) -> String {
    let last = registry_name.rsplit('/').next().unwrap_or(registry_name);
    let mut name = String::new();
    for c in last.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '-'
        };
        if !(c == '-' && (name.is_empty() || name.ends_with('-'))) {
            name.push(c);
        }
        if name.len() >= MAX_PORTICO_NAME {
            break;
        }
    }
    let name = name.trim_matches('-').to_string();
    if name.is_empty() {
        "server".to_string()
    } else {
        name
    }
}

/// What is wrong with a registry name, if anything: the schema's `namespace/name`, at most 200
/// characters.
pub fn registry_name_problem(name: &str) -> Option<&'static str> {
    let Some((namespace, server)) = name.split_once('/') else {
        return Some("a registry name has one `/`, as in io.github.owner/server");
    };
    if name.len() < 3 || name.chars().count() > MAX_NAME_CHARS {
        return Some("a registry name is 3 to 200 characters long");
    }
    let namespace_ok = !namespace.is_empty()
        && namespace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    let server_ok = !server.is_empty()
        && server
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_');
    if !namespace_ok || !server_ok {
        return Some(
            "a registry name has letters, digits, `.` and `-` before its one `/`, and letters, digits, `.`, `-` and `_` after it",
        );
    }
    None
}

/// What the server offers, in words: "an npm package `x` 1.0 and a remote (streamable-http)".
pub fn offers(server: &ServerJson) -> String {
    let mut items: Vec<String> = Vec::new();
    for package in &server.packages {
        let kind = package.registry_type.as_str();
        // As the names are said: "an npm", "a PyPI", "an OCI", "a NuGet", "an MCPB".
        let article = match package.registry_type {
            RegistryType::Npm | RegistryType::Oci | RegistryType::Mcpb => "an",
            _ => "a",
        };
        let version = package
            .version
            .as_deref()
            .map(|v| format!(" {}", printable(v)))
            .unwrap_or_default();
        let transport = match package.transport.known_kind() {
            Some(TransportKind::Stdio) => String::new(),
            _ => format!(" serving {}", printable(&package.transport.kind)),
        };
        items.push(format!(
            "{article} {kind} package `{}`{version}{transport}",
            printable(&package.identifier)
        ));
    }
    for remote in &server.remotes {
        items.push(format!("a remote ({})", printable(&remote.kind)));
    }
    match items.len() {
        0 => "no package and no remote".to_string(),
        1 => items.remove(0),
        _ => {
            let last = items.pop().unwrap_or_default();
            format!("{} and {last}", items.join(", "))
        }
    }
}

/// The ways Portico could run this server, in the default order of preference.
pub fn runnable(server: &ServerJson) -> Vec<RunsAs> {
    let mut kinds: Vec<RunsAs> = server
        .packages
        .iter()
        .filter(|p| p.transport.known_kind() == Some(TransportKind::Stdio))
        .filter_map(|p| package_kind(&p.registry_type))
        .collect();
    if server.remotes.iter().any(|r| {
        matches!(
            r.known_kind(),
            Some(TransportKind::StreamableHttp | TransportKind::Sse)
        )
    }) {
        kinds.push(RunsAs::Remote);
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

fn package_kind(kind: &RegistryType) -> Option<RunsAs> {
    match kind {
        RegistryType::Npm => Some(RunsAs::Npm),
        RegistryType::Pypi => Some(RunsAs::Pypi),
        RegistryType::Oci => Some(RunsAs::Oci),
        _ => None,
    }
}

/// The entry for `server`, and what the user must supply.
pub fn translate(server: &ServerJson, options: &Options) -> Result<Translation, TranslateError> {
    let mut t = Translator {
        registry_name: printable(&server.name),
        values: &options.values,
        inputs: Vec::new(),
        secrets: Vec::new(),
        notes: Vec::new(),
        portico_name: String::new(),
    };
    if let Some(reason) = registry_name_problem(&server.name) {
        return Err(t.refused("the registry name", reason));
    }
    t.check_value("the version", &server.version)?;
    let portico_name = match &options.name {
        Some(chosen) => {
            if let Some(reason) = portico_name_problem(chosen) {
                return Err(TranslateError::BadName {
                    name: server.name.clone(),
                    chosen: printable(chosen),
                    reason,
                });
            }
            chosen.clone()
        }
        None => portico_name(&server.name),
    };
    t.portico_name.clone_from(&portico_name);
    let kinds = runnable(server);
    let runs_as = match options.prefer {
        Some(wanted) if kinds.contains(&wanted) => wanted,
        Some(wanted) => {
            return Err(TranslateError::NotOffered {
                name: server.name.clone(),
                version: printable(&server.version),
                wanted: match wanted {
                    RunsAs::Npm => "npm package",
                    RunsAs::Pypi => "PyPI package",
                    RunsAs::Oci => "OCI image",
                    RunsAs::Remote => "remote",
                },
                offers: offers(server),
            });
        }
        None => match kinds.first() {
            Some(kind) => *kind,
            None => {
                return Err(TranslateError::NothingToRun {
                    name: server.name.clone(),
                    version: printable(&server.version),
                    offers: offers(server),
                });
            }
        },
    };
    let (env, transport, version) = match runs_as {
        RunsAs::Remote => {
            let remote = server
                .remotes
                .iter()
                .find(|r| r.known_kind() == Some(TransportKind::StreamableHttp))
                .or_else(|| {
                    server
                        .remotes
                        .iter()
                        .find(|r| r.known_kind() == Some(TransportKind::Sse))
                })
                .ok_or_else(|| {
                    t.refused("the remote", "it has no streamable-http or sse remote")
                })?;
            (Vec::new(), t.remote(remote)?, printable(&server.version))
        }
        package_kind => {
            let package = server
                .packages
                .iter()
                .find(|p| {
                    p.transport.known_kind() == Some(TransportKind::Stdio)
                        && self::package_kind(&p.registry_type) == Some(package_kind)
                })
                .ok_or_else(|| t.refused("the package", "it has no package of that kind"))?;
            t.package(package_kind, package)?
        }
    };
    if let Some(note) = t.unused_values() {
        t.notes.push(note);
    }
    if let Some(note) = &options.status_note {
        t.notes.insert(0, printable(note));
    }
    Ok(Translation {
        server: ImportedServer {
            name: portico_name,
            origin: if options.origin.is_empty() {
                format!("the MCP registry: {} {version}", t.registry_name)
            } else {
                options.origin.clone()
            },
            enabled: true,
            env,
            transport,
            allow_private_network: false,
        },
        registry_name: server.name.clone(),
        version,
        runs_as,
        inputs: t.inputs,
        secrets: t.secrets,
        notes: t.notes,
        document: server.clone(),
        options: options.clone(),
    })
}

/// What is wrong with a Portico name given by the user, if anything.
pub fn portico_name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("it is empty")
    } else if name.len() > 64 {
        Some("it is longer than 64 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Some("a server name has only letters, digits, `-` and `_`")
    } else {
        None
    }
}

struct Translator<'a> {
    registry_name: String,
    portico_name: String,
    values: &'a BTreeMap<String, String>,
    inputs: Vec<InputNeed>,
    secrets: Vec<SecretValue>,
    notes: Vec<String>,
}

/// How a package runs: its env, its transport and the version pinned.
type Run = (Vec<(String, String)>, ImportedTransport, String);

/// A value as the entry gets it.
enum Resolved {
    /// Written as it is.
    Literal(String),
    /// Written as `${VAR}` (a secret, or a value still to be set).
    Reference(String),
    /// Not given and not required: left out.
    Absent,
    /// Required and not given: the entry cannot have it yet.
    Missing,
}

impl Translator<'_> {
    fn refused(&self, what: &str, reason: impl Into<String>) -> TranslateError {
        TranslateError::Refused {
            name: self.registry_name.clone(),
            what: what.to_string(),
            reason: reason.into(),
        }
    }

    /// A value that goes into the file or a process's argv: one line of printable text, bounded.
    fn check_value(&self, what: &str, value: &str) -> Result<(), TranslateError> {
        if value.chars().count() > MAX_VALUE_CHARS {
            return Err(self.refused(
                what,
                format!("it is longer than {MAX_VALUE_CHARS} characters"),
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(self.refused(what, "it holds a control character (a newline, a tab, ...)"));
        }
        Ok(())
    }

    fn package(&mut self, kind: RunsAs, package: &Package) -> Result<Run, TranslateError> {
        let identifier = &package.identifier;
        if let Some(hint) = &package.runtime_hint {
            let expected = match kind {
                RunsAs::Npm => "npx",
                RunsAs::Pypi => "uvx",
                _ => "docker",
            };
            if hint != expected {
                self.notes.push(format!(
                    "the package's runtime hint is `{}`; Portico runs it with `{expected}`",
                    printable(hint)
                ));
            }
        }
        let (command, spec, version) = match kind {
            RunsAs::Npm | RunsAs::Pypi => {
                let (problem, command, separator) = if kind == RunsAs::Npm {
                    (npm_name_problem(identifier), "npx", "@")
                } else {
                    (pypi_name_problem(identifier), "uvx", "@")
                };
                if let Some(reason) = problem {
                    return Err(self.refused(
                        &format!("the package name `{}`", printable(identifier)),
                        reason,
                    ));
                }
                let Some(version) = &package.version else {
                    return Err(self.refused(
                        &format!("the package `{identifier}`"),
                        "it has no version to pin",
                    ));
                };
                if let Some(reason) = version_problem(version) {
                    return Err(self.refused(
                        &format!("the version `{}` of `{identifier}`", printable(version)),
                        reason,
                    ));
                }
                self.note_registry(package, kind);
                (
                    command,
                    format!("{identifier}{separator}{version}"),
                    version.clone(),
                )
            }
            _ => {
                let image =
                    image_reference(identifier, package.version.as_deref()).map_err(|reason| {
                        self.refused(&format!("the image `{}`", printable(identifier)), reason)
                    })?;
                let version = package
                    .version
                    .clone()
                    .unwrap_or_else(|| image_tag(&image).to_string());
                ("docker", image, version)
            }
        };
        let mut env = Vec::new();
        for variable in &package.environment_variables {
            if let Some(reason) = env_name_problem(&variable.name) {
                return Err(self.refused(
                    &format!("the environment variable `{}`", printable(&variable.name)),
                    reason,
                ));
            }
            match self.key_value(variable, InputPlace::Env, &variable.name)? {
                Resolved::Literal(value) => env.push((variable.name.clone(), value)),
                Resolved::Reference(var) => {
                    env.push((variable.name.clone(), format!("${{{var}}}")))
                }
                Resolved::Absent | Resolved::Missing => {}
            }
        }
        let mut runtime = Vec::new();
        for argument in &package.runtime_arguments {
            self.argument(argument, &mut runtime)?;
        }
        let mut package_args = Vec::new();
        for argument in &package.package_arguments {
            self.argument(argument, &mut package_args)?;
        }
        let mut args: Vec<String> = Vec::new();
        match kind {
            RunsAs::Npm => {
                args.push("-y".into());
                args.extend(runtime);
                args.push(spec);
            }
            RunsAs::Pypi => {
                args.extend(runtime);
                args.push(spec);
            }
            _ => {
                if let Some(flag) = runtime.iter().find(|a| docker_flag_refused(a)) {
                    return Err(self.refused(
                        &format!("the docker argument `{}`", printable(flag)),
                        "it would give the container the host's privileges, devices, network or namespaces",
                    ));
                }
                // A stdio server reads its stdin: `-i`; the container goes when it stops: `--rm`.
                // Each variable is passed by name, so its value comes from docker's own
                // environment (the entry's env), never from the command line.
                args.extend(["run", "-i", "--rm"].map(String::from));
                for (name, _) in &env {
                    args.push("-e".into());
                    args.push(name.clone());
                }
                args.extend(runtime);
                args.push(spec);
            }
        }
        args.extend(package_args);
        let version = printable(&version);
        Ok((
            env,
            ImportedTransport::Stdio {
                command: command.to_string(),
                args,
                cwd: None,
            },
            version,
        ))
    }

    fn note_registry(&mut self, package: &Package, kind: RunsAs) {
        let default = match kind {
            RunsAs::Npm => "https://registry.npmjs.org",
            _ => "https://pypi.org",
        };
        if let Some(base) = &package.registry_base_url
            && base.trim_end_matches('/') != default
        {
            self.notes.push(format!(
                "the package is published on {}; {} fetches it from the index it is configured with",
                printable(base),
                if kind == RunsAs::Npm { "npx" } else { "uvx" }
            ));
        }
    }

    fn remote(&mut self, remote: &Transport) -> Result<ImportedTransport, TranslateError> {
        let kind = match remote.known_kind() {
            Some(TransportKind::StreamableHttp) => "http",
            _ => "sse",
        };
        let template = remote
            .url
            .as_deref()
            .ok_or_else(|| self.refused("the remote", "it has no URL"))?;
        self.check_value("the remote's URL", template)?;
        let url = self.template(
            template,
            &remote.variables,
            InputPlace::UrlVariable,
            "the remote's URL",
            false,
        )?;
        let Some(url) = url else {
            // A variable is still missing; the URL is written once it is given.
            return Ok(ImportedTransport::Remote {
                kind,
                detected: false,
                url: template.to_string(),
                headers: Vec::new(),
            });
        };
        match url::Url::parse(&url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {}
            _ => {
                return Err(self.refused(
                    &format!("the remote URL `{}`", printable(&url)),
                    "it is not an http(s) URL",
                ));
            }
        }
        let mut headers = Vec::new();
        for header in &remote.headers {
            if let Some(reason) = header_name_problem(&header.name) {
                return Err(
                    self.refused(&format!("the header `{}`", printable(&header.name)), reason)
                );
            }
            let variable = if header.name.eq_ignore_ascii_case("authorization") {
                env_var_name(&format!("{}_TOKEN", self.portico_name))
            } else {
                env_var_name(&format!("{}_{}", self.portico_name, header.name))
            };
            match self.key_value(header, InputPlace::Header, &variable)? {
                Resolved::Literal(value) => headers.push((header.name.clone(), value)),
                Resolved::Reference(var) => {
                    headers.push((header.name.clone(), format!("${{{var}}}")))
                }
                Resolved::Absent | Resolved::Missing => {}
            }
        }
        Ok(ImportedTransport::Remote {
            kind,
            detected: false,
            url,
            headers,
        })
    }

    /// An env var or header. `variable`: the `${VAR}` it is referred to by when it is a secret or
    /// not given.
    fn key_value(
        &mut self,
        item: &KeyValueInput,
        place: InputPlace,
        variable: &str,
    ) -> Result<Resolved, TranslateError> {
        let what = format!("the {} `{}`", place.label(), item.name);
        let input = &item.input;
        if let Some(fixed) = &input.value {
            self.check_value(&what, fixed)?;
            // A publisher's fixed value, perhaps with `{variables}` the user gives.
            return Ok(
                match self.template(fixed, &input.variables, place, &what, true)? {
                    Some(value) => Resolved::Literal(value),
                    None => Resolved::Missing,
                },
            );
        }
        self.ask(&item.name, place, input, Some(variable), &what)
    }

    /// An input the user gives. `variable`: where `${VAR}` may stand for it (env and headers).
    fn ask(
        &mut self,
        name: &str,
        place: InputPlace,
        input: &Input,
        variable: Option<&str>,
        what: &str,
    ) -> Result<Resolved, TranslateError> {
        let given = self
            .values
            .get(name)
            .or_else(|| variable.and_then(|v| self.values.get(v)));
        if let Some(value) = given {
            self.check_value(what, value)?;
        }
        if let Some(default) = &input.default {
            self.check_value(what, default)?;
        }
        let mut need = InputNeed {
            name: name.to_string(),
            place,
            description: input.description.as_deref().map(printable),
            secret: input.is_secret,
            required: input.is_required,
            default: if input.is_secret {
                None
            } else {
                input.default.clone()
            },
            choices: input.choices.iter().map(|c| printable(c)).collect(),
            format: input.format.clone(),
            variable: None,
            provided: given.is_some(),
        };
        if let (Some(value), false) = (given, input.choices.is_empty())
            && !input.choices.contains(value)
        {
            return Err(self.refused(
                what,
                format!(
                    "the value given is not one of its choices: {}",
                    need.choices.join(", ")
                ),
            ));
        }
        let resolved = if input.is_secret {
            let Some(variable) = variable else {
                return Err(TranslateError::SecretOnCommandLine {
                    name: self.registry_name.clone(),
                    what: what.to_string(),
                });
            };
            let variable = env_var_name(variable);
            if given.is_none() && !input.is_required {
                Resolved::Absent
            } else {
                if let Some(value) = given {
                    self.secrets.push(SecretValue {
                        variable: variable.clone(),
                        value: value.clone(),
                    });
                }
                need.variable = Some(variable.clone());
                Resolved::Reference(variable)
            }
        } else if let Some(value) = given {
            Resolved::Literal(value.clone())
        } else if let Some(default) = &input.default {
            Resolved::Literal(default.clone())
        } else if !input.is_required {
            Resolved::Absent
        } else if let Some(variable) = variable {
            let variable = env_var_name(variable);
            need.variable = Some(variable.clone());
            Resolved::Reference(variable)
        } else {
            Resolved::Missing
        };
        self.inputs.push(need);
        Ok(resolved)
    }

    /// `value` with each `{name}` of `variables` filled in; `None` while one is missing. A secret
    /// variable becomes `${VAR}` where Portico expands it (`expands`: env values and headers).
    fn template(
        &mut self,
        value: &str,
        variables: &BTreeMap<String, Input>,
        place: InputPlace,
        what: &str,
        expands: bool,
    ) -> Result<Option<String>, TranslateError> {
        let mut out = String::new();
        let mut rest = value;
        let mut complete = true;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let key = &after[..end];
            rest = &after[end + 1..];
            let Some(variable) = variables.get(key) else {
                // Not a variable: the spec leaves it as it is.
                out.push('{');
                out.push_str(key);
                out.push('}');
                continue;
            };
            let reference = expands.then(|| env_var_name(&format!("{}_{key}", self.portico_name)));
            let label = format!("{what} (its variable `{key}`)");
            if variable.is_secret && !expands {
                return Err(TranslateError::SecretOnCommandLine {
                    name: self.registry_name.clone(),
                    what: label,
                });
            }
            let fixed = variable.value.clone();
            let resolved = match fixed {
                Some(fixed) => {
                    self.check_value(&label, &fixed)?;
                    Resolved::Literal(fixed)
                }
                None => self.ask(key, place, variable, reference.as_deref(), &label)?,
            };
            match resolved {
                Resolved::Literal(v) => out.push_str(&v),
                Resolved::Reference(var) => out.push_str(&format!("${{{var}}}")),
                Resolved::Absent => {}
                Resolved::Missing => complete = false,
            }
        }
        out.push_str(rest);
        Ok(complete.then_some(out))
    }

    /// One argument, as zero, one or two argv elements.
    fn argument(
        &mut self,
        argument: &Argument,
        out: &mut Vec<String>,
    ) -> Result<(), TranslateError> {
        let named = match argument.kind.as_str() {
            "named" => true,
            "positional" => false,
            other => {
                return Err(self.refused(
                    &format!("an argument of type `{}`", printable(other)),
                    "arguments are `positional` or `named`",
                ));
            }
        };
        let flag = if named {
            let Some(flag) = &argument.name else {
                return Err(self.refused("a named argument", "it has no `name`"));
            };
            self.check_value("an argument's flag", flag)?;
            if !flag.starts_with('-') || flag.chars().any(char::is_whitespace) {
                return Err(self.refused(
                    &format!("the flag `{}`", printable(flag)),
                    "a flag starts with `-` and has no spaces",
                ));
            }
            Some(flag.clone())
        } else {
            None
        };
        let label = argument
            .value_hint
            .clone()
            .or_else(|| {
                flag.as_deref()
                    .map(|f| f.trim_start_matches('-').to_string())
            })
            .unwrap_or_else(|| "argument".to_string());
        let what = format!(
            "the argument `{}`",
            printable(flag.as_deref().unwrap_or(&label))
        );
        let value = match &argument.input.value {
            Some(fixed) => {
                self.check_value(&what, fixed)?;
                match self.template(
                    fixed,
                    &argument.input.variables,
                    InputPlace::Argument,
                    &what,
                    false,
                )? {
                    Some(value) => Resolved::Literal(value),
                    None => Resolved::Missing,
                }
            }
            None => self.ask(&label, InputPlace::Argument, &argument.input, None, &what)?,
        };
        match value {
            Resolved::Literal(value) => {
                out.extend(flag);
                out.push(value);
            }
            // Only env values and headers refer to variables.
            Resolved::Reference(_) => {
                return Err(TranslateError::SecretOnCommandLine {
                    name: self.registry_name.clone(),
                    what,
                });
            }
            Resolved::Absent | Resolved::Missing => {}
        }
        Ok(())
    }

    /// Values given that no input took: a typo the user should hear about.
    fn unused_values(&self) -> Option<String> {
        let unused: Vec<&str> = self
            .values
            .keys()
            .filter(|key| {
                !self.inputs.iter().any(|input| {
                    &input.name == *key || input.variable.as_deref() == Some(key.as_str())
                })
            })
            .map(String::as_str)
            .collect();
        (!unused.is_empty()).then(|| {
            format!(
                "not used, as the server takes no such value: {}",
                unused.join(", ")
            )
        })
    }
}

/// Text safe to show: control characters as spaces, cut at 200 characters.
pub(crate) fn printable(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > 200 {
        out.push('…');
    }
    out
}

fn env_name_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128;
    (!ok).then_some("an environment variable's name has letters, digits and `_`, and does not start with a digit")
}

fn header_name_problem(name: &str) -> Option<&'static str> {
    // RFC 9110's token characters.
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
    (!ok).then_some("a header's name is a token: letters, digits and !#$%&'*+-.^_`|~")
}

/// npm's rules for a package name: an optional `@scope/`, then URL-safe characters, at most 214.
fn npm_name_problem(name: &str) -> Option<&'static str> {
    let body_ok = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && !part.starts_with('_')
            && !part.starts_with('-')
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
    };
    let ok = name.len() <= 214
        && !name.contains("..")
        && match name.strip_prefix('@') {
            Some(scoped) => scoped
                .split_once('/')
                .is_some_and(|(scope, package)| body_ok(scope) && body_ok(package)),
            None => body_ok(name),
        };
    (!ok).then_some("not an npm package name (`name` or `@scope/name`: letters, digits, `-._~`)")
}

/// PEP 508's names: letters, digits, `-._`, starting and ending with a letter or digit.
fn pypi_name_problem(name: &str) -> Option<&'static str> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
    (!ok).then_some("not a PyPI package name (letters, digits and `-._`)")
}

/// One exact version: no range, no `latest`, nothing a package manager would read as an option.
fn version_problem(version: &str) -> Option<&'static str> {
    let ok = !version.is_empty()
        && version.len() <= 128
        && version.starts_with(|c: char| c.is_ascii_alphanumeric())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-_".contains(c))
        && !version.contains("..")
        && !version.eq_ignore_ascii_case("latest")
        && !version
            .split('.')
            .any(|part| part.eq_ignore_ascii_case("x"));
    (!ok).then_some(
        "a version is pinned exactly (no ranges, no `latest`): letters, digits and `.+-_`",
    )
}

/// The image to run, pinned: `identifier` with its tag or digest, or with `:version` when the
/// document puts the version beside it (the schema before 2025-10-11).
fn image_reference(identifier: &str, version: Option<&str>) -> Result<String, &'static str> {
    let ok = !identifier.is_empty()
        && identifier.len() <= 512
        && identifier.starts_with(|c: char| c.is_ascii_alphanumeric())
        && !identifier.contains("..")
        && identifier
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "./:_@-".contains(c));
    if !ok {
        return Err("not an image reference ([registry/]namespace/image[:tag][@digest])");
    }
    let last = identifier.rsplit('/').next().unwrap_or(identifier);
    if last.contains('@') || last.contains(':') {
        if last.ends_with(":latest") {
            return Err("its tag is `latest`, which is not a pinned version");
        }
        return Ok(identifier.to_string());
    }
    match version {
        Some(version) if version_problem(version).is_none() => {
            Ok(format!("{identifier}:{version}"))
        }
        _ => Err("it has no tag or digest, so its version is not pinned"),
    }
}

/// The tag (or digest) of a pinned image.
fn image_tag(image: &str) -> &str {
    let last = image.rsplit('/').next().unwrap_or(image);
    last.rsplit_once('@')
        .map(|(_, digest)| digest)
        .or_else(|| last.rsplit_once(':').map(|(_, tag)| tag))
        .unwrap_or("")
}

/// Docker flags that hand the container the host: refused from a registry's runtime arguments.
fn docker_flag_refused(arg: &str) -> bool {
    let flag = arg.split('=').next().unwrap_or(arg);
    const REFUSED: &[&str] = &[
        "--privileged",
        "--cap-add",
        "--device",
        "--pid",
        "--ipc",
        "--uts",
        "--userns",
        "--network",
        "--net",
        "--security-opt",
        "--cgroupns",
        "--volumes-from",
    ];
    REFUSED.contains(&flag)
        || arg == "/var/run/docker.sock"
        || arg.starts_with("/var/run/docker.sock:")
        || arg.starts_with("/:")
}

#[cfg(test)]
mod tests;
