//! Authorizer tests over hand-made objects: index upkeep, reasons, errors.
