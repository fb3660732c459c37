//! The one CEL environment every expression compiles and runs in: the
//! standard library, the strings and lists extensions, the Kubernetes
//! libraries and the cost hook. Built once; `Env` is immutable and shared.

use cel::Env;
use std::sync::{Arc, LazyLock};

static ENV: LazyLock<Result<Arc<Env>, String>> = LazyLock::new(build);

fn build() -> Result<Arc<Env>, String> {
    let mut env = Env::stdlib();
    // cel-go keeps the last of repeated map literal keys.
    env.set_error_on_duplicate_map_keys(false);
    env.add_extension(cel::extensions::strings)
        .map_err(|e| e.to_string())?;
    env.add_extension(cel::extensions::lists)
        .map_err(|e| e.to_string())?;
    env.add_extension(crate::library::register)
        .map_err(|e| e.to_string())?;
    env.add_extension(crate::cost::register)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(env))
}

/// The shared environment; an error only if registering the libraries
/// failed, which is a bug.
pub(crate) fn env() -> Result<&'static Arc<Env>, String> {
    ENV.as_ref().map_err(Clone::clone)
}
