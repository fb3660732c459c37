pub mod flow_schema;
