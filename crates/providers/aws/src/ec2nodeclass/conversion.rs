//! The v1beta1 to v1 conversion of EC2NodeClass (being written).
