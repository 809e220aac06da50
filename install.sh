#!/bin/sh
# Installs the precedent binary from a GitHub release: picks the archive
# for this OS and CPU, checks it against its SHA-256 checksum, and puts
# `precedent` in ~/.local/bin (or $PRECEDENT_INSTALL_DIR).
#
#   curl -fsSL https://github.com/OWNER/precedent/releases/latest/download/install.sh | sh
#
# Environment:
#   PRECEDENT_INSTALL_DIR   where the binary goes (default: ~/.local/bin)
#   PRECEDENT_VERSION       a release tag such as v0.1.0 (default: the latest)
#   PRECEDENT_REPOSITORY    the GitHub repository, owner/name (the release's
#                           own copy of this script names it)
#   PRECEDENT_DOWNLOAD_URL  the folder the archives are read from, instead of
#                           the GitHub release (a mirror, or a local copy)

set -eu

# The release workflow writes its repository here in the copy it attaches.
DEFAULT_REPOSITORY="@REPOSITORY@"

say() {
    printf 'precedent install: %s\n' "$*"
}

fail() {
    printf 'precedent install: %s\n' "$*" >&2
    exit 1
}

# The Rust target triple of this machine.
detect_target() {
    os=$(uname -s)
    cpu=$(uname -m)
    case "$cpu" in
        x86_64 | amd64) cpu=x86_64 ;;
        aarch64 | arm64) cpu=aarch64 ;;
        *) fail "no release build for the CPU $cpu; build from source: cargo install --locked --git <repository>" ;;
    esac
    case "$os" in
        Linux)
            if ldd --version 2>&1 | grep -qi musl; then
                fail "the release builds need glibc, and this system uses musl; build from source with cargo"
            fi
            echo "$cpu-unknown-linux-gnu"
            ;;
        Darwin)
            # A shell under Rosetta reports x86_64 on Apple silicon.
            if [ "$cpu" = x86_64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || echo 0)" = 1 ]; then
                cpu=aarch64
            fi
            echo "$cpu-apple-darwin"
            ;;
        MINGW* | MSYS* | CYGWIN* | Windows_NT)
            fail "on Windows, download precedent-x86_64-pc-windows-msvc.zip from the release page"
            ;;
        *) fail "no release build for $os" ;;
    esac
}

# download URL FILE
download() {
    if command -v curl >/dev/null 2>&1; then
        curl --proto '=https,http,file' -fsSL --retry 3 -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$2" "$1"
    else
        fail "needs curl or wget"
    fi
}

# The SHA-256 of FILE, as hex.
sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d ' ' -f 1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d ' ' -f 1
    elif command -v openssl >/dev/null 2>&1; then
        openssl dgst -sha256 -r "$1" | cut -d ' ' -f 1
    else
        fail "needs sha256sum, shasum or openssl to check the download"
    fi
}

base_url() {
    if [ -n "${PRECEDENT_DOWNLOAD_URL:-}" ]; then
        echo "${PRECEDENT_DOWNLOAD_URL%/}"
        return
    fi
    repository=${PRECEDENT_REPOSITORY:-$DEFAULT_REPOSITORY}
    case "$repository" in
        */*) ;;
        *) fail "set PRECEDENT_REPOSITORY=owner/name (the GitHub repository precedent is released from)" ;;
    esac
    case "$repository" in
        *@*) fail "set PRECEDENT_REPOSITORY=owner/name (the GitHub repository precedent is released from)" ;;
    esac
    version=${PRECEDENT_VERSION:-latest}
    if [ "$version" = latest ]; then
        echo "https://github.com/$repository/releases/latest/download"
    else
        echo "https://github.com/$repository/releases/download/$version"
    fi
}

main() {
    target=$(detect_target)
    url=$(base_url)
    install_dir=${PRECEDENT_INSTALL_DIR:-${HOME:?HOME is not set}/.local/bin}
    archive="precedent-$target.tar.gz"

    work=$(mktemp -d 2>/dev/null || mktemp -d -t precedent)
    trap 'rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM

    say "downloading $url/$archive"
    download "$url/$archive" "$work/$archive" || fail "cannot download $url/$archive"
    download "$url/$archive.sha256" "$work/$archive.sha256" ||
        fail "cannot download $url/$archive.sha256"

    expected=$(cut -d ' ' -f 1 <"$work/$archive.sha256" | tr 'A-F' 'a-f')
    actual=$(sha256_of "$work/$archive")
    case "$expected" in
        "" | *[!0-9a-f]*) fail "$archive.sha256 holds no SHA-256" ;;
    esac
    if [ "$expected" != "$actual" ]; then
        fail "$archive does not match its checksum (expected $expected, got $actual); nothing was installed"
    fi
    say "checksum verified ($actual)"

    tar -xzf "$work/$archive" -C "$work"
    binary="$work/precedent-$target/precedent"
    [ -f "$binary" ] || fail "$archive holds no precedent-$target/precedent"

    mkdir -p "$install_dir"
    # Copied beside the target, then renamed over it: a running precedent
    # keeps its file, and a failed copy leaves the old one.
    cp "$binary" "$install_dir/.precedent.$$"
    chmod 755 "$install_dir/.precedent.$$"
    mv -f "$install_dir/.precedent.$$" "$install_dir/precedent"

    say "installed $("$install_dir/precedent" --version 2>/dev/null || echo precedent) to $install_dir/precedent"
    case ":${PATH:-}:" in
        *":$install_dir:"*) ;;
        *) say "$install_dir is not on PATH; add it, e.g. export PATH=\"$install_dir:\$PATH\"" ;;
    esac
    say "next: precedent setup --agent claude-code (or --agent codex)"
}

main "$@"
