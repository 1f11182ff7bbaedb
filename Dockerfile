# pgdns in a container: a static binary on a distroless base.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /pgdns ./cmd/pgdns

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /pgdns /pgdns
COPY configs/pgdns.yaml /etc/pgdns/pgdns.yaml
EXPOSE 5353/udp 5353/tcp 8080/tcp
ENTRYPOINT ["/pgdns", "-config", "/etc/pgdns/pgdns.yaml"]
