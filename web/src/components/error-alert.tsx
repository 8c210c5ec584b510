/** What went wrong, announced as it appears; nothing while there is no message. */
export function ErrorAlert({ message, id }: { message: string | null | undefined; id?: string }) {
  if (message === null || message === undefined) return null;
  return (
    <p id={id} class="error" role="alert">
      {message}
    </p>
  );
}
