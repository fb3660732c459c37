pub mod runtime_class;
