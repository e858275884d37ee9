# syntax=docker/dockerfile:1
#
# Switchboard in a container: `docker build -t switchboard .` then
#   docker run -p 8080:8080 -v switchboard-data:/data switchboard
# Configuration is by the SWITCHBOARD_* environment variables (see README).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not rebuild them: a stub crate with the
# real manifest and lock file fetches and compiles every dependency.
COPY Cargo.toml Cargo.lock ./
# How the bundled SQLite is compiled (see .cargo/config.toml): the dependency layer
# must be built with it too.
COPY .cargo .cargo
COPY crates/switchboard-types/Cargo.toml crates/switchboard-types/
COPY crates/switchboard-client/Cargo.toml crates/switchboard-client/
RUN mkdir -p src benches/load examples crates/switchboard-types/src crates/switchboard-client/src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs crates/switchboard-types/src/lib.rs crates/switchboard-client/src/lib.rs \
    && echo 'fn main() {}' > benches/load/main.rs \
    && cargo build --release --locked --bin switchboard \
    && rm -rf src benches examples crates/switchboard-types/src crates/switchboard-client/src
COPY . .
# Make sure the real sources are newer than the stub build's artefacts.
RUN touch src/main.rs src/lib.rs crates/switchboard-types/src/lib.rs crates/switchboard-client/src/lib.rs \
    && cargo build --release --locked --bin switchboard \
    && cp target/release/switchboard /usr/local/bin/switchboard

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home switchboard \
    && mkdir -p /data \
    && chown switchboard:switchboard /data
COPY --from=build /usr/local/bin/switchboard /usr/local/bin/switchboard
USER switchboard
ENV SWITCHBOARD_LISTEN=0.0.0.0:8080 \
    SWITCHBOARD_DATABASE=/data/switchboard.db \
    SWITCHBOARD_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["switchboard", "healthcheck"]
ENTRYPOINT ["switchboard"]
CMD ["serve"]
