# The container image (docs/image.md). Included by the top-level Makefile; `test: image`
# adds it to test's prerequisites (the image tests and the local node's container mode run it).
.PHONY: image

image: ## build localhost/atlantis-operator:<version> from the Dockerfile with buildah (cached by its inputs; hack/image/build.sh)
	bash hack/image/build.sh

test: image
