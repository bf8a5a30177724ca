# Sourced first by the scripts that need root for part of their work, so that one command works as
# root and as a normal user: `as_root WHAT` returns at once for root; for a normal user it runs the
# whole script again through sudo (which asks for the password); where there is no sudo it says to run
# the script as root.
as_root_script="$(realpath "$0")"
as_root_arguments=("$@")

as_root() {
    [[ ${EUID} -eq 0 ]] && return 0
    if command -v sudo >/dev/null 2>&1; then
        echo "$(basename "${as_root_script}"): ${1} needs root; running it again through sudo" >&2
        exec sudo -- "${as_root_script}" "${as_root_arguments[@]}"
    fi
    echo "$(basename "${as_root_script}"): ${1} needs root, and there is no sudo here: run it as root" >&2
    exit 4
}
