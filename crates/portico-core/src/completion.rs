//! What an argument completion is for: a prompt or a resource (template), named as the catalog names
//! them. The doors parse the protocol's reference into this; the hub maps it to the upstream's names.

/// The thing whose argument a completion request completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRef {
    /// A prompt, by name.
    Prompt {
        name: String,
        /// A display name the client sent along; passed on as it came.
        title: Option<String>,
    },
    /// A resource or resource template, by URI or URI template.
    Resource { uri: String },
}
