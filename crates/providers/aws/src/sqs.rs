//! The interruption queue: SQS over its JSON protocol, long-polled.

use std::future::Future;

use serde_json::{Value, json};

use crate::http::{AwsError, AwsHttp, Result};

/// A received message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueMessage {
    /// What deletes it.
    pub receipt_handle: String,
    /// The body (an EventBridge event).
    pub body: String,
    /// When SQS received it, milliseconds since the epoch.
    pub sent_timestamp_ms: Option<u64>,
}

/// A queue of interruption messages.
pub trait Queue: Send + Sync + 'static {
    /// Waits up to 20 seconds for up to 10 messages.
    fn receive(&self) -> impl Future<Output = Result<Vec<QueueMessage>>> + Send;
    /// Deletes a handled message.
    fn delete(&self, receipt_handle: String) -> impl Future<Output = Result<()>> + Send;
}

/// An SQS queue.
#[derive(Clone)]
pub struct SqsQueue {
    http: AwsHttp,
    url: String,
}

async fn call(http: &AwsHttp, action: &str, body: Value) -> Result<Value> {
    let bytes = http
        .send(
            "sqs",
            "POST",
            "/",
            &[],
            &[
                ("content-type", "application/x-amz-json-1.0"),
                ("x-amz-target", &format!("AmazonSQS.{action}")),
            ],
            body.to_string().into_bytes(),
        )
        .await?;
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| AwsError::Parse(format!("{action}: {e}")))
}

impl SqsQueue {
    /// The queue named `name` (upstream's `--interruption-queue`).
    pub async fn open(http: AwsHttp, name: &str) -> Result<Self> {
        let answer = call(&http, "GetQueueUrl", json!({"QueueName": name})).await?;
        let url = answer["QueueUrl"]
            .as_str()
            .ok_or_else(|| AwsError::Parse("GetQueueUrl: no QueueUrl".into()))?
            .to_string();
        Ok(Self { http, url })
    }

    /// The queue's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Queue for SqsQueue {
    async fn receive(&self) -> Result<Vec<QueueMessage>> {
        let answer = call(
            &self.http,
            "ReceiveMessage",
            json!({
                "QueueUrl": self.url,
                "MaxNumberOfMessages": 10,
                "VisibilityTimeout": 20,
                "WaitTimeSeconds": 20,
                "AttributeNames": ["SentTimestamp"],
                "MessageAttributeNames": ["All"],
            }),
        )
        .await?;
        Ok(answer["Messages"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|m| QueueMessage {
                        receipt_handle: m["ReceiptHandle"].as_str().unwrap_or_default().into(),
                        body: m["Body"].as_str().unwrap_or_default().into(),
                        sent_timestamp_ms: m["Attributes"]["SentTimestamp"]
                            .as_str()
                            .and_then(|t| t.parse().ok()),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn delete(&self, receipt_handle: String) -> Result<()> {
        call(
            &self.http,
            "DeleteMessage",
            json!({"QueueUrl": self.url, "ReceiptHandle": receipt_handle}),
        )
        .await
        .map(|_| ())
    }
}
