# Sourced by the bundle scripts on the machine where Go is (bundle.sh,
# bundle_encoder.sh, pack.sh): copy_libs BINDIR LIBDIR copies every shared
# library the executables in BINDIR link, resolving symlinks, into LIBDIR,
# except libc's and the C++ runtime's, which the GPU machine's image has
# (OpenBLAS and its Fortran runtime are what it lacks).
copy_libs() {
	local f name path
	for f in "$1"/*; do
		[[ -f "$f" && -x "$f" ]] || continue
		ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
	done | sort -u | while read -r name path; do
		case "$name" in
		libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libgcc_s.so.*|libstdc++.so.*) continue ;;
		esac
		cp -L "$path" "$2/$name"
	done
}
