//! The one HTTP client every AWS call goes through: hyper over rustls (or plain HTTP to a local
//! endpoint such as moto in tests), SigV4-signed, with AWS's error bodies turned into
//! [`AwsError::Api`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use karpenter_cloudprovider::http::HttpClient;

use crate::auth::CredentialsProvider;
use crate::auth::sigv4::{self, SignableRequest};

/// Why an AWS call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AwsError {
    /// The service answered with an error code (`InvalidInstanceID.NotFound`,
    /// `InsufficientInstanceCapacity`, …).
    #[error("{code}: {message}")]
    Api {
        /// The error code.
        code: String,
        /// The service's message.
        message: String,
        /// The HTTP status.
        status: u16,
    },
    /// The request did not get an answer.
    #[error("request to {0}")]
    Transport(String),
    /// The answer could not be read.
    #[error("unreadable response: {0}")]
    Parse(String),
    /// No credentials could be found or refreshed.
    #[error("credentials: {0}")]
    Credentials(String),
}

impl AwsError {
    /// The error code of an API error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A result of an AWS call.
pub type Result<T> = std::result::Result<T, AwsError>;

/// Where the services are: the real endpoints of a region, or one override for all (moto,
/// VPC endpoints behind a proxy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The region requests are signed for.
    pub region: String,
    /// One URL for every service (`http://127.0.0.1:5000`), instead of the public endpoints.
    pub override_url: Option<String>,
}

impl Endpoints {
    /// The base URL of a service (`ec2`, `sqs`, `ssm`, `sts`, `iam`, `pricing`).
    pub fn url(&self, service: &str) -> String {
        if let Some(url) = &self.override_url {
            return url.trim_end_matches('/').to_string();
        }
        match service {
            "iam" => "https://iam.amazonaws.com".into(),
            "pricing" => format!(
                "https://api.pricing.{}.amazonaws.com",
                pricing_region(&self.region)
            ),
            _ => format!("https://{service}.{}.amazonaws.com", self.region),
        }
    }

    /// The region a service's requests are signed for.
    pub fn signing_region(&self, service: &str) -> String {
        match service {
            "iam" => "us-east-1".into(),
            "pricing" => pricing_region(&self.region).into(),
            _ => self.region.clone(),
        }
    }
}

/// The Pricing API answers in a few regions only.
fn pricing_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else {
        "us-east-1"
    }
}

/// A signed AWS request sender.
#[derive(Clone)]
pub struct AwsHttp {
    client: HttpClient,
    /// Where the services are.
    pub endpoints: Endpoints,
    credentials: CredentialsProvider,
}

impl AwsHttp {
    /// A client for `endpoints`, signing with `credentials`.
    pub fn new(endpoints: Endpoints, credentials: CredentialsProvider) -> Result<Self> {
        Ok(Self {
            client: HttpClient::new(Duration::from_secs(30))
                .map_err(|e| AwsError::Transport(e.to_string()))?,
            endpoints,
            credentials,
        })
    }

    /// Sends a signed request to `service`; `path_and_query` starts with `/`.
    pub async fn send(
        &self,
        service: &str,
        method: &str,
        path: &str,
        query: &[(String, String)],
        extra_headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Bytes> {
        let base = self.endpoints.url(service);
        let host = base
            .split_once("://")
            .map_or(base.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let credentials = self.credentials.get(self).await?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let amz_date = sigv4::amz_date(now);
        let mut headers: Vec<(String, String)> = vec![
            ("host".into(), host),
            ("x-amz-date".into(), amz_date.clone()),
        ];
        headers.extend(
            extra_headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        if let Some(token) = &credentials.session_token {
            headers.push(("x-amz-security-token".into(), token.clone()));
        }
        let signature = sigv4::sign(
            &SignableRequest {
                method,
                path,
                query,
                headers: &headers,
                body: &body,
            },
            &credentials,
            &self.endpoints.signing_region(service),
            service,
            &amz_date,
        );
        headers.push(("authorization".into(), signature.authorization));
        let query_string = query
            .iter()
            .map(|(k, v)| format!("{}={}", sigv4::uri_encode(k), sigv4::uri_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let url = if query_string.is_empty() {
            format!("{base}{path}")
        } else {
            format!("{base}{path}?{query_string}")
        };
        let mut builder = http::Request::builder().method(method).uri(&url);
        for (k, v) in &headers {
            if k != "host" {
                builder = builder.header(k.as_str(), v.as_str());
            }
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| AwsError::Transport(format!("{url}: {e}")))?;
        let (status, bytes) = self.round_trip(request, &url).await?;
        if status >= 400 {
            return Err(parse_error(status, &bytes));
        }
        Ok(bytes)
    }

    /// A Query-protocol call (EC2, IAM): the parameters form-encoded in a signed POST, the
    /// XML answer as text.
    pub async fn query(&self, service: &str, params: &[(String, String)]) -> Result<String> {
        let body = params
            .iter()
            .map(|(k, v)| format!("{}={}", sigv4::uri_encode(k), sigv4::uri_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let bytes = self
            .send(
                service,
                "POST",
                "/",
                &[],
                &[(
                    "content-type",
                    "application/x-www-form-urlencoded; charset=utf-8",
                )],
                body.into_bytes(),
            )
            .await?;
        String::from_utf8(bytes.to_vec()).map_err(|e| AwsError::Parse(e.to_string()))
    }

    /// Sends an unsigned request (STS web identity, the Pod Identity agent).
    pub async fn send_unsigned(&self, request: http::Request<Full<Bytes>>) -> Result<(u16, Bytes)> {
        let url = request.uri().to_string();
        self.round_trip(request, &url).await
    }

    async fn round_trip(
        &self,
        request: http::Request<Full<Bytes>>,
        url: &str,
    ) -> Result<(u16, Bytes)> {
        let (parts, body) = request.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| AwsError::Transport(format!("{url}: {e}")))?
            .to_bytes();
        let response = self
            .client
            .send(&http::Request::from_parts(parts, body))
            .await
            .map_err(|e| AwsError::Transport(e.to_string()))?;
        Ok((response.status, response.body))
    }
}

/// An error body: EC2's `<Response><Errors><Error><Code>`, the query protocol's
/// `<ErrorResponse><Error><Code>`, or the JSON protocols' `{"__type": …, "message": …}`.
pub fn parse_error(status: u16, body: &[u8]) -> AwsError {
    let text = String::from_utf8_lossy(body);
    if let Ok(doc) = roxmltree::Document::parse(&text) {
        let find = |name: &str| {
            doc.descendants()
                .find(|n| n.has_tag_name(name))
                .and_then(|n| n.text())
                .map(str::to_string)
        };
        if let Some(code) = find("Code") {
            return AwsError::Api {
                code,
                message: find("Message").unwrap_or_default(),
                status,
            };
        }
    }
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
        let code = json["__type"]
            .as_str()
            .or(json["code"].as_str())
            .unwrap_or("Unknown");
        // JSON 1.0/1.1 put the error shape's namespace before a '#'.
        let code = code.rsplit('#').next().unwrap_or(code).to_string();
        let message = json["message"]
            .as_str()
            .or(json["Message"].as_str())
            .unwrap_or_default()
            .to_string();
        return AwsError::Api {
            code,
            message,
            status,
        };
    }
    AwsError::Api {
        code: format!("HTTP{status}"),
        message: text.chars().take(200).collect(),
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_from_each_protocol() {
        let ec2 = br#"<?xml version="1.0"?><Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID 'i-1' does not exist</Message></Error></Errors><RequestID>x</RequestID></Response>"#;
        assert_eq!(
            parse_error(400, ec2).code(),
            Some("InvalidInstanceID.NotFound")
        );
        let json = br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#;
        let e = parse_error(400, json);
        assert_eq!(e.code(), Some("QueueDoesNotExist"));
        assert!(e.to_string().contains("does not exist"));
        assert_eq!(parse_error(503, b"busy").code(), Some("HTTP503"));
    }

    #[test]
    fn endpoints() {
        let e = Endpoints {
            region: "eu-west-1".into(),
            override_url: None,
        };
        assert_eq!(e.url("ec2"), "https://ec2.eu-west-1.amazonaws.com");
        assert_eq!(
            e.url("pricing"),
            "https://api.pricing.eu-central-1.amazonaws.com"
        );
        assert_eq!(e.signing_region("iam"), "us-east-1");
        let local = Endpoints {
            region: "us-east-1".into(),
            override_url: Some("http://127.0.0.1:5000/".into()),
        };
        assert_eq!(local.url("sqs"), "http://127.0.0.1:5000");
    }
}
