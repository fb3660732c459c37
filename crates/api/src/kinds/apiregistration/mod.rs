pub mod api_service;
