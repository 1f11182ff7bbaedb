# pgdns in a container: a static binary on a distroless base.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# What `pgdns -version` and the start-up log say; .git stays out of the
# build context, so the builder names it: `make image` and docker-compose
# pass `git describe` (docker build --build-arg VERSION=...).
ARG VERSION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /pgdns ./cmd/pgdns

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /pgdns /pgdns
COPY configs/pgdns.yaml /etc/pgdns/pgdns.yaml
EXPOSE 5353/udp 5353/tcp 8080/tcp
ENTRYPOINT ["/pgdns", "-config", "/etc/pgdns/pgdns.yaml"]
