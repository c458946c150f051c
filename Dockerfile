# strata as a container image: a drop-in for the official Cosmos DB emulator images.
#   docker build -t strata .
#   docker run -p 8081:8081 -v strata-data:/data strata
# Multi-stage: the Rust toolchain only in the build stage; the final image is Debian slim
# with the one binary, run as a non-root user, data in the /data volume.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p strata-server \
 && strip target/release/strata \
 && cp target/release/strata /strata

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin strata \
 && mkdir -p /data \
 && chown strata /data
COPY --from=build /strata /usr/local/bin/strata
USER strata
# Listen on every interface of the container, keep data (and the generated certificate) in
# /data, and speak HTTPS on 8081 like the official emulators (PROTOCOL=http for plain HTTP).
# The official emulators' variables work too: PORT, DATA_PATH, LOG_LEVEL, ENABLE_EXPLORER,
# AZURE_COSMOS_EMULATOR_PARTITION_COUNT, AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE,
# AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE; and STRATA_<FLAG> for every flag.
# The certificate is also copied where the official Linux emulator keeps its emulator.pem,
# which the Testcontainers module for Python copies out of the container.
ENV STRATA_HOST=0.0.0.0 \
    STRATA_DATA_DIR=/data \
    PROTOCOL=https \
    STRATA_CERT_COPY=/tmp/cosmos/appdata/.system/profiles/Client/AppData/Local/CosmosDBEmulator/emulator.pem
VOLUME ["/data"]
EXPOSE 8081
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=12 \
  CMD ["strata", "ready"]
ENTRYPOINT ["strata"]
