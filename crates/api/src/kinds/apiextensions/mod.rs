pub mod custom_resource_definition;
