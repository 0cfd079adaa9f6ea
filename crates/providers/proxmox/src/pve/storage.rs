//! Storages: what a node has, what a storage holds, uploads (the cloud-init ISO), downloads
//! (a template's source image) and deleting a volume.

use super::client::PveClient;
use super::error::PveError;
use super::form::{Params, encode_segment, multipart};
use super::types::{DownloadUrlOptions, Storage, StorageContent};
use super::upid::Upid;

fn storage_path(node: &str, storage: &str) -> String {
    format!(
        "/nodes/{}/storage/{}",
        encode_segment(node),
        encode_segment(storage)
    )
}

impl PveClient {
    /// `GET /nodes/{node}/storage[?content=…]`: the node's storages, with their space; only
    /// those holding `content` (`iso`, `images`, `import`) when given.
    pub async fn storages(
        &self,
        node: &str,
        content: Option<&str>,
    ) -> Result<Vec<Storage>, PveError> {
        self.get(
            &format!("/nodes/{}/storage", encode_segment(node)),
            &Params::new().opt("content", content),
        )
        .await
    }

    /// `GET /nodes/{node}/storage/{storage}/content[?content=…]`: the volumes.
    pub async fn storage_content(
        &self,
        node: &str,
        storage: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageContent>, PveError> {
        self.get(
            &format!("{}/content", storage_path(node, storage)),
            &Params::new().opt("content", content),
        )
        .await
    }

    /// `POST /nodes/{node}/storage/{storage}/upload`: stores `data` as `filename` with
    /// `content` (`iso`, `vztmpl`), sent as `multipart/form-data`. The volume is
    /// `<storage>:<content>/<filename>` once the task ends.
    pub async fn upload(
        &self,
        node: &str,
        storage: &str,
        content: &str,
        filename: &str,
        data: &[u8],
    ) -> Result<Upid, PveError> {
        let body = multipart(&[("content", content)], filename, data)
            .map_err(|e| PveError::Request(e.to_string()))?;
        self.post_multipart(&format!("{}/upload", storage_path(node, storage)), body)
            .await
    }

    /// [`PveClient::upload`] of an ISO image (upstream's cloud-init NoCloud ISO).
    pub async fn upload_iso(
        &self,
        node: &str,
        storage: &str,
        filename: &str,
        data: &[u8],
    ) -> Result<Upid, PveError> {
        self.upload(node, storage, "iso", filename, data).await
    }

    /// `POST /nodes/{node}/storage/{storage}/download-url`: the node downloads a file into
    /// the storage, checking its checksum when given.
    pub async fn download_url(
        &self,
        node: &str,
        storage: &str,
        options: &DownloadUrlOptions,
    ) -> Result<Upid, PveError> {
        self.post(
            &format!("{}/download-url", storage_path(node, storage)),
            options.params(),
        )
        .await
    }

    /// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`, `volume` being a volume id
    /// (`local:iso/user-data-100.iso`); `None` when PVE deleted it at once.
    pub async fn delete_volume(
        &self,
        node: &str,
        storage: &str,
        volume: &str,
    ) -> Result<Option<Upid>, PveError> {
        self.delete(
            &format!(
                "{}/content/{}",
                storage_path(node, storage),
                encode_segment(volume)
            ),
            &Params::new(),
        )
        .await
    }
}
