pub mod storage_class;
