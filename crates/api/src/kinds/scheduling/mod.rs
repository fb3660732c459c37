pub mod priority_class;
