pub mod certificate_signing_request;
