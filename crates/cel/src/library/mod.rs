//! The Kubernetes CEL libraries cel-rust lacks (`k8s.io/apiserver/pkg/cel/library`):
//! IP and CIDR, URLs, quantities, the list functions, sets, and regex
//! `find`/`findAll`. cel-rust brings the standard library, the strings and
//! lists extensions, optionals, `matches`, `duration()` and `timestamp()`.

mod duration;
mod lists;
mod net;
mod quantity;
mod regex;
mod url;

use cel::{DeclarationError, Env, ExecutionError};

pub(crate) use duration::use_go_durations;

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    net::register(env)?;
    url::register(env)?;
    quantity::register(env)?;
    lists::register(env)?;
    regex::register(env)?;
    duration::register(env)?;
    Ok(())
}

/// An error raised by library function `function`: cel-go's messages are the
/// library's own, so the detail alone is kept (see [`crate::error`]).
pub(crate) fn fail(function: &str, message: impl Into<String>) -> ExecutionError {
    ExecutionError::function_error(function, message.into())
}

/// Implements [`Val`] for an opaque library type: equal by value, no
/// operators.
macro_rules! opaque_val {
    ($ty:ident, $cel_type:ident, $name:literal) => {
        pub(crate) static $cel_type: cel::common::types::Type =
            cel::common::types::Type::simple_type(cel::common::types::Kind::Opaque, $name);

        impl cel::common::value::Val for $ty {
            fn get_type(&self) -> &cel::common::types::Type {
                &$cel_type
            }

            fn cel_type() -> &'static cel::common::types::Type {
                &$cel_type
            }

            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                other.downcast_ref::<$ty>().is_some_and(|o| o == self)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v> {
                Box::new(self.clone())
            }

            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }

        impl cel::common::value::StaticVal for $ty {}
    };
}
pub(crate) use opaque_val;
