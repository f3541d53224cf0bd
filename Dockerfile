# Multi-stage build: the host crate's build script builds the Wasm guest, so one
# `cargo build` makes a binary with the storage component embedded.
FROM rust:1.95-bookworm AS build
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p gateway \
 && cp target/release/gateway /usr/local/bin/gateway

FROM debian:bookworm-slim
RUN useradd --system --home-dir /data wasm-storage \
 && mkdir -p /data && chown wasm-storage /data
COPY --from=build /usr/local/bin/gateway /usr/local/bin/gateway
USER wasm-storage
ENV WASM_STORAGE_LISTEN=0.0.0.0:8080 \
    WASM_STORAGE_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gateway"]
