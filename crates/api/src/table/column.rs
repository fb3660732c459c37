//! A Table column's definition (a leaf: kinds name their columns without depending on
//! the table builder).

pub struct Col {
    pub(crate) name: &'static str,
    pub(crate) ty: &'static str,
    pub(crate) format: &'static str,
    pub(crate) description: &'static str,
    pub(crate) priority: i32,
}
