//! Nothing to link: this package holds the tests of `packaging/` (the units, the .deb and
//! .rpm packages `packaging/build` makes, their install and purge in a node container).
