# Spillway container image: a static binary on an empty base, run as a
# non-root user. docs/deploy.md shows how to run it.
#
#   docker build -t spillway .
#   docker run -d --name spillway --read-only -p 80:80 -p 443:443 \
#     -v /etc/spillway:/etc/spillway:ro spillway
#
# The build stage runs on the build machine's platform and cross-compiles for
# the target (docker buildx build --platform linux/amd64,linux/arm64 ...).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# .git is part of the build context (see .dockerignore), so the binary's build
# info carries the commit that 'spillway version' prints.
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /out/spillway ./cmd/spillway \
 && mkdir -p /out/etc/spillway

FROM scratch
# CA certificates, for backend services and health checks over TLS.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/spillway /etc/spillway
COPY --from=build /out/spillway /spillway
# 65532 is the "nonroot" user of distroless images; the image has no
# /etc/passwd, so it is given by number.
USER 65532:65532
# HTTP, HTTPS, DNS (when dnsZones are configured). The admin API listens on
# the container's loopback (127.0.0.1:9901): 'docker exec' reaches it.
# Binding ports below 1024 as a non-root user: Docker (20.10 and later) sets
# net.ipv4.ip_unprivileged_port_start=0 in a container's own network
# namespace, so this works on the default bridge network; with
# --network=host, see docs/deploy.md.
EXPOSE 80/tcp 443/tcp 53/udp 53/tcp
# Healthy while the admin API answers GET /healthz (no token needed); the
# binary asks, since the image has no shell or curl.
HEALTHCHECK --interval=10s --timeout=6s --start-period=15s --retries=3 \
  CMD ["/spillway", "get-health", "--live"]
ENTRYPOINT ["/spillway"]
CMD ["serve", "--config", "/etc/spillway/config.yaml"]
