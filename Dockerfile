# Build: docker build -t karpenter-rs .
# A static-ish release binary on a distroless, non-root base (no shell, no package manager).
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p karpenter-cli \
    && cp target/release/karpenter-rs /karpenter-rs

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /karpenter-rs /usr/local/bin/karpenter-rs
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/karpenter-rs"]
CMD ["controller"]
