# The fluxhop operator image: fluxhop with kopf, run as a non-root user.
#   docker build -t ghcr.io/fluxhop/fluxhop-operator:0.1.0 .
FROM python:3.12-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir '.[operator]' && rm -rf /src
USER 65532:65532
ENTRYPOINT ["fluxhop"]
CMD ["operator", "--all-namespaces"]
