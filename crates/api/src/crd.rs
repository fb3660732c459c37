//! CustomResourceDefinitions: what the objects of a custom resource must look like (the
//! structural OpenAPI v3 schema: validation, pruning, defaulting) and the CEL rules
//! (`x-kubernetes-validations`) they must pass.

pub mod structural;
