//! CEL expressions of policies and webhook matchConditions, compiled once per distinct
//! text rather than on every write they apply to.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_cel::Expression;
use serde_json::Value;

/// A compiled expression, or why it did not compile.
pub type Compiled = Arc<Result<Expression, String>>;

/// Compiled expressions by source text.
#[derive(Default)]
pub struct ExpressionCache(parking_lot::Mutex<HashMap<String, Compiled>>);

/// Distinct expressions kept before the cache starts over (policies edited many times).
const EXPRESSION_CACHE_LIMIT: usize = 4096;

impl ExpressionCache {
    pub fn compiled(&self, source: &str) -> Compiled {
        if let Some(e) = self.0.lock().get(source) {
            return e.clone();
        }
        let compiled = Arc::new(cairn_cel::compile_expression(source));
        let mut map = self.0.lock();
        if map.len() >= EXPRESSION_CACHE_LIMIT {
            map.clear();
        }
        map.insert(source.to_string(), compiled.clone());
        compiled
    }

    /// Evaluates `source` as a boolean over `vars`; compile and evaluation errors alike
    /// come back as `Err` with their message.
    pub fn eval_bool(&self, source: &str, vars: &[(&str, &Value)]) -> Result<bool, String> {
        match self.compiled(source).as_ref() {
            Ok(e) => e.eval_bool(vars),
            Err(e) => Err(e.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_once_and_reports_errors() {
        let cache = ExpressionCache::default();
        let obj = json!({"a": 1});
        let vars: [(&str, &Value); 1] = [("object", &obj)];
        assert_eq!(cache.eval_bool("object.a == 1", &vars), Ok(true));
        assert!(Arc::ptr_eq(
            &cache.compiled("object.a == 1"),
            &cache.compiled("object.a == 1")
        ));
        assert!(cache.eval_bool("object.a ==", &vars).is_err());
    }
}
